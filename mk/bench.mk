# make bench: slidegate against its peers on one redis-server the benchmark
# starts itself, in the separate bench/ module (peers never enter go.mod).
# Writes docs/benchmarks.md, docs/benchmarks/*.svg and results.json.
# BENCH_FLAGS passes flags through, e.g. BENCH_FLAGS=-quick or -rounds=5.

BENCH_FLAGS ?=

.PHONY: bench bench-test

## bench: the benchmark against peer libraries, writing docs/benchmarks.md (about 9 minutes;
## it builds the Runtime Interface Emulator first, for the cold-start figures)
bench: ensure-redis rie
	cd bench && GOFLAGS=-mod=mod $(GO) run . -out ../docs $(BENCH_FLAGS)

## bench-test: the bench module compiles and vets (the sliding-buckets bound
## is proved in pkg/ratelimit/buckets_redis_test.go, part of `make test`)
bench-test:
	cd bench && GOFLAGS=-mod=mod $(GO) vet ./...

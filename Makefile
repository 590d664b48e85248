# slidegate: distributed rate limiting for AWS Lambda behind API Gateway.
#
#   make local   the rate-limited API on 127.0.0.1:3000 (ADDR=host:port)
#   make test    every test, against real redis-server processes it starts,
#                then the Redis-facing ones again on valkey-server
#   make build   both functions' bootstrap binaries (linux/arm64; GOARCH=amd64)
#   make bench   the benchmark against peer libraries, writing a report

SHELL       := /bin/bash
GO          ?= go
GOOS        ?= linux
GOARCH      ?= arm64
BIN         := $(CURDIR)/bin
STATICCHECK := $(BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
FUZZTIME    ?= 20000x
# VALKEY: auto (run the Valkey half when valkey-server is there or can be
# installed, else say it was not run), required (fail instead), skip.
VALKEY      ?= auto
# CFN_LINT, MOTO: auto (run cfn-lint, and the tests that need moto_server,
# when the tool is on PATH, else say it was not run), required (fail
# instead), skip. Both are Python tools: pip install cfn-lint 'moto[server]'.
CFN_LINT    ?= auto
MOTO        ?= auto

.PHONY: all test test-valkey test-cfn-lint ensure-moto vet staticcheck ensure-redis ensure-valkey fuzz fuzz-long clean

all: test

## test: vet, staticcheck, then every test (unit, integration on real Redis),
## the Redis-facing tests again on Valkey (test-valkey), every Go benchmark
## once (so none rots; figures come from `go test -bench` and `make bench`),
## and short fuzz runs, and cfn-lint on the templates (test-cfn-lint). The
## AWS calls are tested against moto_server (ensure-moto). A failure fails it.
## The benchmarks run once in the same `go test` as the tests (one build and
## one process per package, not two); the Valkey half runs the library's
## Redis-facing tests (VALKEY_SCOPE=all: every one, see scripts/test-valkey.sh).
## -parallel 4: the tests marked t.Parallel are mostly ones that sleep (for
## the control watch's 2 s, or a hanging Redis), each with its own servers;
## four of them wait side by side on 2 cores, where the default (GOMAXPROCS)
## would let only two.
test: ensure-redis ensure-valkey ensure-moto vet staticcheck test-cfn-lint
	@echo "== every test on $$($${REDIS_SERVER:-redis-server} --version)"
	CFN_LINT=$(CFN_LINT) MOTO=$(MOTO) $(GO) test -count=1 -timeout 15m -parallel 4 -bench . -benchtime 1x ./...
	@echo "== the TRACER=otel build's tracing tests (build tag otel)"
	$(GO) vet -tags otel ./internal/tracing/ && $(GO) test -count=1 -timeout 5m -tags otel ./internal/tracing/
	@VALKEY=$(VALKEY) GO=$(GO) ./scripts/test-valkey.sh
	$(MAKE) --no-print-directory fuzz

## test-valkey: the Redis-facing tests (those that start a server through
## internal/testkit/redistest) with REDIS_SERVER=valkey-server
test-valkey:
	@VALKEY=$(VALKEY) GO=$(GO) ./scripts/test-valkey.sh

## test-cfn-lint: cfn-lint on every template*.yaml (SAM transform, and the SAM
## translation), failing on any error or warning
test-cfn-lint:
	@CFN_LINT=$(CFN_LINT) ./scripts/test-cfn-lint.sh

## ensure-moto: say which moto_server the AWS-facing tests use, or plainly
## that they will be skipped (MOTO=required: fail instead)
ensure-moto:
	@if [ "$(MOTO)" = skip ]; then echo "moto NOT run: MOTO=skip; the tests of the AWS calls skip"; \
	else ./scripts/ensure-moto.sh || [ $$? -eq 3 -a "$(MOTO)" != required ]; fi

## ensure-redis: install redis-server if missing (Debian/Ubuntu as root) or say how
ensure-redis:
	@./scripts/ensure-redis.sh

## ensure-valkey: install valkey-server if missing (Debian as root; bookworm
## from bookworm-backports), or say plainly that the Valkey half will not run
ensure-valkey:
	@if [ "$(VALKEY)" = skip ]; then echo "Valkey half NOT run: VALKEY=skip"; \
	else ./scripts/ensure-valkey.sh || [ $$? -eq 3 -a "$(VALKEY)" != required ]; fi

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

$(STATICCHECK):
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags otel ./internal/tracing/

## fuzz: each fuzzer on FUZZTIME inputs (20000x by default; the few whose
## coverage saturates sooner get 5000x, and the Redis-backed ones, whose
## inputs cost most, 10000x: listed with the figures in scripts/fuzz.sh);
## fuzz-long: 2,000,000 each.
## Counts, not durations: a duration can end in a spurious "context deadline
## exceeded" from the Go fuzzer when a loaded machine stretches its shutdown.
fuzz:
	@./scripts/fuzz.sh $(FUZZTIME)

fuzz-long:
	@./scripts/fuzz.sh 2000000x

clean:
	rm -rf $(BIN) .aws-sam

# Targets owned by each part of the project: functions (build, invoke),
# local (make local), bench (make bench).
-include mk/*.mk

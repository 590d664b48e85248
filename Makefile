# slidegate: distributed rate limiting for AWS Lambda behind API Gateway.
#
#   make local   the rate-limited API on 127.0.0.1:3000 (ADDR=host:port)
#   make test    every test, against real redis-server processes it starts
#   make build   both functions' bootstrap binaries (linux/arm64; GOARCH=amd64)
#   make bench   the benchmark against peer libraries, writing a report

GO          ?= go
GOOS        ?= linux
GOARCH      ?= arm64
BIN         := $(CURDIR)/bin
STATICCHECK := $(BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
FUZZTIME    ?= 20000x

.PHONY: all test vet staticcheck ensure-redis fuzz fuzz-long clean

all: test

## test: vet, staticcheck, then every test (unit, integration on real Redis),
## every Go benchmark once (so none rots; figures come from `go test -bench`
## and `make bench`), and short fuzz runs
test: ensure-redis vet staticcheck
	$(GO) test -count=1 -timeout 15m ./...
	$(GO) test -count=1 -timeout 5m -run '^$$' -bench . -benchtime 1x ./...
	$(MAKE) --no-print-directory fuzz

## ensure-redis: install redis-server if missing (Debian/Ubuntu as root) or say how
ensure-redis:
	@./scripts/ensure-redis.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

$(STATICCHECK):
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

## fuzz: each fuzzer on FUZZTIME inputs (20000x by default); fuzz-long: 2,000,000 each.
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

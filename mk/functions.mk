# Functions: build (what `sam build` runs) and invoke (`sam local invoke -e`
# without Docker, under the AWS Lambda Runtime Interface Emulator).
#
#   make build                          every function's bootstrap into .aws-sam/build-local/<Function>/
#   make build TRACER=none              the same without the X-Ray SDK (see TRACER below)
#   make build TRACER=otel              the same with OpenTelemetry instead (see TRACER below)
#   make build-AuthorizerFunction ARTIFACTS_DIR=dir   (sam build, BuildMethod: makefile)
#   make build-ApiFunction ARTIFACTS_DIR=dir
#   make build-OperatorFunction ARTIFACTS_DIR=dir
#   make invoke FUNCTION=authorizer EVENT=events/authorizer-anonymous.json
#   make invoke FUNCTION=operator EVENT=events/operator-block.json
#
# `make invoke` runs the bootstrap built for THIS machine under the RIE (built
# from its Go module into ./bin), posts the event, prints the response and
# stops the emulator and the bootstrap (their own process group, killed
# whole) on every way out: done, an error, Ctrl-C, or a reader that stops
# early (`make invoke | head`). Redis: REDIS_URL if set (a Redis you run, e.g.
# the one `make local REDIS_URL=...` uses); without it, a redis-server of the
# run's own on a free loopback port, empty, stopped with the emulator (or,
# when no redis-server is installed, none: every decision then finds Redis
# unavailable, a normal route answers a degraded Allow and the login route
# an error, and the run says so). So that every event in
# events/ does what its name says, invoke sets test-only credentials unless
# you set your own: the example API key "slidegate-example-api-key-0001" (as
# API_KEY_HASHES) and the HS256 secret "slidegate-test-only-hs256-secret"
# (JWT_HS256_SECRET, issuer https://auth.example.com/, audience
# slidegate-example) that signed events/authorizer-jwt-valid.json, and the
# identity hash key "slidegate-local-only-identity-hash-key-0001"
# (RATE_LIMIT_HASH_KEY: the key `make local` uses, so that `slidegate
# inspect` with it finds the counts of both on one Redis), so that runs hash
# identities keyed as deployments do. Never use any of them anywhere real. That event's token expires on
# 2027-11-30 (a token may live at most a year); TestAuthorizerEvents
# re-signs it on every run.

# TRACER picks the tracer linked into both functions: xray (the default,
# what the template deploys: one X-Ray subsegment per Redis call of a sampled
# invocation) or none (build tag noxray: no tracer is linked, nothing is ever
# sent, and the bootstrap is smaller and initialises faster; Lambda still
# records the function's own segment when Tracing is Active) or otel (build
# tag otel: OpenTelemetry spans over OTLP/HTTP to the collector of the ADOT
# Lambda layer, template parameter OtelCollectorLayerArn; see
# docs/observability.md). sam build runs these targets with the default
# unless TRACER is set in its environment.
#
#   make build TRACER=none
TRACER            ?= xray
GO_BUILD_TAGS_xray := lambda.norpc
GO_BUILD_TAGS_none := lambda.norpc,noxray
GO_BUILD_TAGS_otel := lambda.norpc,otel
GO_BUILD_TAGS      = $(or $(GO_BUILD_TAGS_$(TRACER)),$(error TRACER=$(TRACER): want xray, none or otel))

CGO_ENABLED_BUILD := CGO_ENABLED=0
GO_BUILD_FLAGS     = -tags $(GO_BUILD_TAGS) -trimpath -ldflags '-s -w $(VERSION_LDFLAGS)'
RIE_MODULE        := github.com/aws/aws-lambda-runtime-interface-emulator
RIE_VERSION       := v0.0.0-20261030222936-bef5c4ba774d
RIE               := $(BIN)/aws-lambda-rie
HOST_GOOS          = $(shell $(GO) env GOHOSTOS)
HOST_GOARCH        = $(shell $(GO) env GOHOSTARCH)

FUNCTION ?= authorizer
EVENT    ?= events/authorizer-anonymous.json

EXAMPLE_API_KEY_HASH := 1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8
API_KEY_HASHES       ?= $(EXAMPLE_API_KEY_HASH)
JWT_ISSUER           ?= https://auth.example.com/
JWT_AUDIENCE         ?= slidegate-example
JWT_HS256_SECRET     ?= slidegate-test-only-hs256-secret
RATE_LIMIT_HASH_KEY  ?= slidegate-local-only-identity-hash-key-0001

.PHONY: build build-AuthorizerFunction build-ApiFunction build-OperatorFunction invoke rie

## build: every function's bootstrap (GOOS=linux, GOARCH=arm64 unless overridden; TRACER=xray|none|otel)
build:
	$(MAKE) --no-print-directory build-AuthorizerFunction ARTIFACTS_DIR=
	$(MAKE) --no-print-directory build-ApiFunction ARTIFACTS_DIR=
	$(MAKE) --no-print-directory build-OperatorFunction ARTIFACTS_DIR=
	@ls -l .aws-sam/build-local/*/bootstrap

build-AuthorizerFunction: OUT = $(or $(ARTIFACTS_DIR),$(CURDIR)/.aws-sam/build-local/AuthorizerFunction)
build-AuthorizerFunction:
	@mkdir -p "$(OUT)"
	$(CGO_ENABLED_BUILD) GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build $(GO_BUILD_FLAGS) -o "$(OUT)/bootstrap" ./functions/authorizer

build-ApiFunction: OUT = $(or $(ARTIFACTS_DIR),$(CURDIR)/.aws-sam/build-local/ApiFunction)
build-ApiFunction:
	@mkdir -p "$(OUT)"
	$(CGO_ENABLED_BUILD) GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build $(GO_BUILD_FLAGS) -o "$(OUT)/bootstrap" ./functions/api

# The operator function (live controls through IAM; see docs/operations.md).
build-OperatorFunction: OUT = $(or $(ARTIFACTS_DIR),$(CURDIR)/.aws-sam/build-local/OperatorFunction)
build-OperatorFunction:
	@mkdir -p "$(OUT)"
	$(CGO_ENABLED_BUILD) GOOS=$(GOOS) GOARCH=$(GOARCH) $(GO) build $(GO_BUILD_FLAGS) -o "$(OUT)/bootstrap" ./functions/operator

## rie: the Runtime Interface Emulator, built from its Go module into ./bin
rie: $(RIE)

$(RIE):
	GOBIN=$(BIN) GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) install $(RIE_MODULE)/cmd/aws-lambda-rie@$(RIE_VERSION)

## invoke: FUNCTION=authorizer|api|operator EVENT=events/x.json, under the RIE
invoke: $(RIE)
	@case "$(FUNCTION)" in authorizer|api|operator) ;; *) echo "FUNCTION must be authorizer, api or operator" >&2; exit 2;; esac
	@test -f "$(EVENT)" || { echo "EVENT=$(EVENT): no such file" >&2; exit 2; }
	@mkdir -p $(BIN)/invoke/$(FUNCTION)
	@$(CGO_ENABLED_BUILD) GOOS=$(HOST_GOOS) GOARCH=$(HOST_GOARCH) $(GO) build $(GO_BUILD_FLAGS) -o $(BIN)/invoke/$(FUNCTION)/bootstrap ./functions/$(FUNCTION)
	@set -u; \
	 port=; for p in $$(seq 20 60); do cand=$$(( 20000 + ($$$$ * 7 + p * 389) % 12000 )); \
	   if ! (exec 3<>/dev/tcp/127.0.0.1/$$cand) 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/$$((cand+1))) 2>/dev/null; then port=$$cand; break; fi; done; \
	 test -n "$$port" || { echo "no free port" >&2; exit 1; }; \
	 log=$$(mktemp); rie=; redis=; redis_url='$(REDIS_URL)'; \
	 cleanup() { if [ -n "$$rie" ]; then kill -TERM -- -$$rie 2>/dev/null || kill -TERM $$rie 2>/dev/null; wait $$rie 2>/dev/null; fi; \
	   if [ -n "$$redis" ]; then kill -TERM $$redis 2>/dev/null; wait $$redis 2>/dev/null; fi; rm -f "$$log"; }; \
	 trap cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 141' PIPE HUP; \
	 if [ -z "$$redis_url" ]; then \
	   rport=$$((port + 2)); server=$${REDIS_SERVER:-redis-server}; \
	   if ! command -v "$$server" >/dev/null; then echo "make invoke: no $$server and no REDIS_URL: every decision finds Redis unavailable (degraded)" >&2; \
	   elif (exec 3<>/dev/tcp/127.0.0.1/$$rport) 2>/dev/null; then echo "make invoke: port $$rport taken: no Redis of its own, every decision degraded" >&2; \
	   else "$$server" --port $$rport --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 </dev/null & redis=$$!; \
	     for i in $$(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$$rport) 2>/dev/null && break; sleep 0.05; done; \
	     redis_url=redis://127.0.0.1:$$rport/0; fi; \
	 fi; \
	 setsid env -i PATH="$$PATH" HOME="$$HOME" AWS_REGION="$${AWS_REGION:-us-east-1}" AWS_EC2_METADATA_DISABLED=true \
	   REDIS_URL="$$redis_url" API_KEY_HASHES='$(API_KEY_HASHES)' JWT_ISSUER='$(JWT_ISSUER)' \
	   JWT_AUDIENCE='$(JWT_AUDIENCE)' JWT_HS256_SECRET='$(JWT_HS256_SECRET)' \
	   RATE_LIMIT_HASH_KEY='$(RATE_LIMIT_HASH_KEY)' \
	   $(RIE) --runtime-interface-emulator-address 127.0.0.1:$$port --runtime-api-address 127.0.0.1:$$((port+1)) \
	   --log-level error $(BIN)/invoke/$(FUNCTION)/bootstrap >"$$log" 2>&1 </dev/null & rie=$$!; \
	 for i in $$(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$$port) 2>/dev/null && break; sleep 0.05; done; \
	 curl -sS -X POST --data-binary @$(EVENT) -H 'Content-Type: application/json' \
	   http://127.0.0.1:$$port/2015-03-31/functions/function/invocations; echo; \
	 echo "--- function log ($(FUNCTION), $(EVENT)) ---" >&2; cat "$$log" >&2

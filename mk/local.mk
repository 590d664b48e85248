# make local: the rate-limited REST API on a laptop, as API Gateway would
# serve it from template.yaml (authorizer, gateway responses, stage
# variables), with an embedded Redis unless REDIS_URL is set. No Docker.
# Built with the build tag noxray: a local run traces nothing, so neither
# the X-Ray SDK nor the gRPC it brings is downloaded or compiled (the
# functions' own builds keep TRACER=xray by default). The embedded Redis
# gets a 1s budget a decision (REDIS_TIMEOUT, unless set), not the
# template's 100ms for ElastiCache.
#
#   make local                       http://127.0.0.1:3000, stage dev
#   make local ADDR=0.0.0.0:8080     another address
#   make local STAGE=prod            the prod stage's limits (samconfig.toml)
#   make local HTTPAPI=true          the HTTP API (v2) events instead
#   RATE_LIMIT_ANONYMOUS=3/5s make local   a limit from the environment wins
#                                    over samconfig.toml (printed at start)
#   make local REDIS_URL=redis://127.0.0.1:6380/0   a real Redis

ADDR    ?= 127.0.0.1:3000
STAGE   ?= dev
HTTPAPI ?= false

.PHONY: local

## local: the API on $(ADDR) with the authorizer and API handler in-process
local:
	ADDR='$(ADDR)' STAGE='$(STAGE)' HTTPAPI='$(HTTPAPI)' REDIS_URL='$(REDIS_URL)' $(GO) run -tags noxray ./cmd/localapi

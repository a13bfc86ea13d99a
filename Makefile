# pactledger: all set-up lives here. `make test` is what CI runs.
SHELL := /bin/bash
GO    ?= go
TOOL  := $(GO) tool -modfile=tools/go.mod

VERSITYGW_VERSION := v1.8.0
CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pactledger
VERSITYGW := $(CACHE_DIR)/versitygw-$(VERSITYGW_VERSION)/versitygw
export PACTLEDGER_VERSITYGW := $(VERSITYGW)

.PHONY: readme-check test unit packages chromium firefox postgres proto proto-check lint bench run clean-data fuzz console-screenshots

## test: regenerate-and-diff the protobuf code, lint, then every test
## (integration included: a real S3 server with Object Lock and throwaway
## PostgreSQL clusters are started). On a new machine the S3 test server is
## built and the packages installed while the code is checked, not after.
test:
	@$(MAKE) --no-print-directory -j 4 --output-sync=target proto-check lint $(VERSITYGW) packages
	@$(MAKE) --no-print-directory unit readme-check

## packages: the Debian packages the tests need, one install at a time
## (the package manager takes one at a time).
packages:
	@scripts/ensure-chromium
	@scripts/ensure-firefox
	@scripts/ensure-postgres

unit: $(VERSITYGW) chromium firefox postgres
	PACTLEDGER_CHROMIUM=1 PACTLEDGER_FIREFOX=1 PACTLEDGER_POSTGRES=1 $(GO) test -count=1 -timeout 10m ./...

## readme-check: the README's shell blocks, run in order in a fresh copy of
## the checkout (ports 8080, 9090, 8090 and 8099 must be free).
readme-check:
	scripts/readme-check

## The browser tests' headless Chromium (Debian package), installed when missing.
chromium:
	@scripts/ensure-chromium

## The browser tests' headless Firefox (Debian's firefox-esr, driven over
## WebDriver BiDi), installed when missing.
firefox:
	@scripts/ensure-firefox

## PostgreSQL for the PostgreSQL store's tests (Debian package), installed
## when missing; the tests start throwaway clusters of their own.
postgres:
	@scripts/ensure-postgres

## The S3 test server, built once from the Go module proxy at a pinned version.
$(VERSITYGW):
	@echo "building versitygw $(VERSITYGW_VERSION) into $(dir $@) (once)"
	@mkdir -p $(dir $@)
	GOBIN=$(dir $@) GOFLAGS=-mod=mod $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

## proto: regenerate Go, gRPC, gateway and OpenAPI code offline.
proto:
	$(TOOL) buf lint
	$(TOOL) buf generate

## proto-check: fail when regeneration would change the committed code.
proto-check:
	$(TOOL) buf lint
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(TOOL) buf generate --output $$tmp && \
	for f in $$(cd $$tmp && find . -type f); do \
	  cmp -s $$tmp/$$f $$f || { echo "generated $$f is out of date: run make proto"; exit 1; }; \
	done; echo "generated code is up to date"

## lint: gofmt, go vet, staticcheck.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(TOOL) staticcheck ./...

## bench: ledgerd on bbolt + S3 evidence under load, then the Provider's
## message:send and its pipeline draining a backlog; prints figures and
## ratios. STORE=postgres compares
## ledgerd on PostgreSQL (one and two replicas) with bbolt instead.
BENCH_FLAGS ?=
bench: $(VERSITYGW) $(if $(STORE),postgres)
	$(GO) run ./internal/cmd/ledgerbench $(if $(STORE),-store $(STORE)) $(BENCH_FLAGS)
	$(GO) test ./pact -run '^$$' -bench BenchmarkMessageSend -benchtime 10s -count 3
	$(GO) test ./internal/server -run '^$$' -bench BenchmarkBacklogDrain -benchtime 5x

## fuzz: run each fuzz target for a while (FUZZTIME, default 30s).
FUZZTIME ?= 30s
## The write-then-read fuzzer runs a ledgerd (and the S3 test server);
## minimisation is bounded because background work moves coverage.
fuzz: $(VERSITYGW)
	for f in FuzzParseCompact FuzzParseReceipt FuzzParseKeySet FuzzVerify; do \
	  $(GO) test ./verifier -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; done
	$(GO) test ./verifier/p256 -run '^$$' -fuzz '^FuzzVerifyAgrees$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pact/provider -run '^$$' -fuzz '^FuzzParseSend$$' -fuzztime $(FUZZTIME)
	$(GO) test ./pact/provider -run '^$$' -fuzz '^FuzzBearerToken$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/server -run '^$$' -fuzz '^FuzzWriteThenRead$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 50x

## console-screenshots: regenerate docs/console-*.png (the pictures in
## docs/console.md) in headless Chromium.
console-screenshots: chromium
	PACTLEDGER_CHROMIUM=1 PACTLEDGER_CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run '^TestConsoleScreenshots$$' ./internal/console

run:
	$(GO) run ./cmd/ledgerd

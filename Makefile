# LoopX for Lark. `make run` serves; `make test` runs every test. See README.md.
GO      ?= go
BIN     := bin/loopx
# make build leaves the version to Go's VCS stamp (loopx version says dev, the commit and its
# time); make build VERSION=x names it. Releases come from make release.
LDFLAGS := $(if $(VERSION),-X main.version=$(VERSION))
DIST    ?= dist

.PHONY: help run build test test-loaded lint schema bench chaos postgres pgbouncer release release-check image image-check upgrade-test

## help: list the targets
help:
	@awk -F': ' '/^## /{sub(/^## /,""); split($$0,a,": "); printf "  %-14s %s\n", a[1], substr($$0, length(a[1])+3)}' $(MAKEFILE_LIST)

## build: compile bin/loopx
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/loopx

## run: build and start `loopx serve` (private PostgreSQL under LOOPX_HOME when DATABASE_URL is unset)
run: postgres build
	./$(BIN) serve

## test: every test, against TEST_DATABASE_URL, 127.0.0.1:5432, or a private cluster
test:
	scripts/with-postgres.sh $(GO) test -count=1 ./...

## test-loaded: `make test` on a busy machine: two suites at once (fresh clones of HEAD, private PostgreSQL clusters) beside two busy loops
test-loaded:
	MAKE='$(MAKE)' GO='$(GO)' scripts/test-loaded.sh

## schema: regenerate store/schema.sql from a freshly migrated database
schema:
	LOOPX_UPDATE_SCHEMA=1 scripts/with-postgres.sh $(GO) test -count=1 -run TestSchemaFileMatchesAFreshMigration ./store

## lint: formatting, vet, and the floors and import rules (floors_test.go)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 .

## bench: Go benchmarks and the whole-process should-run benchmark; results in bench/results/
bench: build
	scripts/with-postgres.sh bench/run.sh

## chaos: the standing fault suite (bench/chaos): three real replicas, PostgreSQL restarts, pgbouncer, Lark faults; figures in bench/results/chaos.json
chaos: postgres pgbouncer build
	$(GO) run ./bench/chaos -loopx $(BIN) -out bench/results/chaos.json

## release: static binaries for linux and darwin (amd64, arm64) from HEAD, with SHA256SUMS and CHANGES, in dist/; VERSION=vX.Y.Z records the release in RELEASES
release:
	GO=$(GO) DIST=$(DIST) scripts/release.sh

## release-check: the release in dist/ says its version; its commit built again from an empty cache gives the same bytes, and the whole release again the same SHA256SUMS
release-check:
	GO=$(GO) DIST=$(DIST) scripts/release-check.sh

## image: the container image of the release in dist/ (podman, FROM scratch, non-root), tagged loopx:<version>; prints its size
image:
	GO=$(GO) DIST=$(DIST) scripts/image.sh build

## image-check: build the image and run it against PostgreSQL: a walkthrough through the API and the sandbox, then deploy/replicas behind nginx; figures in bench/results/image.json
image-check: postgres
	GO=$(GO) DIST=$(DIST) scripts/image.sh check

## upgrade-test: the previous release (RELEASES) and this tree across one database: upgrade with data, mixed replicas under load, downgrade refused, rollback; figures in bench/results/upgrade.json
upgrade-test: postgres build
	GO=$(GO) scripts/upgrade-test.sh

## pgbouncer: install Debian's pgbouncer (the chaos suite runs it in transaction mode).
pgbouncer:
	@if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then \
		echo "installing Debian's pgbouncer for make chaos" >&2; \
		if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq pgbouncer >/dev/null; \
	fi

## postgres: install Debian's postgresql when the machine has no server binaries.
postgres:
	@scripts/with-postgres.sh --install-only

# Weir — make targets. `make test` is what CI runs (.ci/run).
GO        ?= go
BIN       := $(CURDIR)/bin
LINT      := $(BIN)/golangci-lint
LINT_VER  := v2.15.0
PKGS      := ./...
export CGO_ENABLED ?= 1

# The stamp `weir version` prints (cmd/weir/version.go). Each can be set on
# the command line (make release VERSION=v0.2.0); GOFLAGS=-buildvcs=false
# and builds outside a git checkout leave Go's own VCS stamp empty, so the
# Makefile's builds always set these.
VERSION    := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT     := $(shell git rev-parse HEAD 2>/dev/null)
BUILD_TIME := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
STAMP      := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildTime=$(BUILD_TIME)

.PHONY: hostile fuzz-long traefik traefik-test overload soak
.PHONY: release image version
.PHONY: all build tools test check fmt fmt-check vet lint tidy-check proto proto-check bench gubernator bench-repl bench-targets bench-micro bench-load bench-cluster compose-test jepsen-quick jepsen jepsen-upgrade jepsen-compose run clean

all: build

build: ## build the weir binary into bin/ (static, stamped with VERSION, COMMIT, BUILD_TIME)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(STAMP)' -o $(BIN)/weir ./cmd/weir

# make release: static binaries (CGO_ENABLED=0; on macOS Go links only the
# system's libSystem, as every darwin binary must) for RELEASE_PLATFORMS,
# named weir-VERSION-OS-ARCH, and their SHA-256 sums in SHA256SUMS, into
# RELEASE_DIR/VERSION. A tree with uncommitted changes is refused unless
# ALLOW_DIRTY=1: a named release is a commit.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
RELEASE_DIR       ?= $(CURDIR)/dist
ALLOW_DIRTY       ?=
release: ## static binaries for linux/amd64, linux/arm64, darwin/arm64 + SHA256SUMS under dist/VERSION/
	@case "$(VERSION)" in *-dirty) if [ -z "$(ALLOW_DIRTY)" ]; then \
		echo "release: the tree has uncommitted changes ($(VERSION)); commit, or ALLOW_DIRTY=1"; exit 1; fi;; esac
	@out=$(RELEASE_DIR)/$(VERSION); rm -rf $$out; mkdir -p $$out; set -e; \
	for p in $(RELEASE_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; \
		echo "release: weir-$(VERSION)-$$os-$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(STAMP)' \
			-o $$out/weir-$(VERSION)-$$os-$$arch ./cmd/weir; \
	done; \
	cd $$out; if command -v sha256sum >/dev/null; then sha256sum weir-*; else shasum -a 256 weir-*; fi > SHA256SUMS; \
	cat SHA256SUMS; echo "release: $$out"

# make image: the container image (deploy/Dockerfile, FROM scratch) around
# the stamped static binary, labelled with the same version and commit.
IMAGE ?= weir:$(VERSION)
image: build ## the deploy/ container image, tagged IMAGE (default weir:VERSION)
	@ctx=$$(mktemp -d) && cp $(BIN)/weir deploy/limits.yaml $$ctx/ && \
	docker build -q -f deploy/Dockerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
		-t $(IMAGE) $$ctx >/dev/null; rc=$$?; rm -rf $$ctx; \
	if [ $$rc = 0 ]; then echo "image: $(IMAGE)"; fi; exit $$rc

version: ## print the version the build and release targets stamp
	@echo $(VERSION)

run: ## start one node on the embedded default limits
	$(GO) run ./cmd/weir serve

# -p 1: one test binary at a time. The ring and node suites each run
# memberlist clusters with sub-second failure detection; on two cores, run
# side by side, they starve each other's probes and fail by timing alone.
test: fmt-check vet tidy-check proto-check lint ## everything CI checks
	$(GO) test -race -shuffle=on -count=1 -p 1 -timeout 15m $(PKGS)
	@if [ "$$(id -u)" = 0 ] || [ "$$CI" = "true" ]; then $(MAKE) --no-print-directory jepsen-quick; \
	else echo "jepsen-quick skipped: it needs root for network namespaces (CI runs it)"; fi

check: test ## alias of test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# vet and lint type-check every package against its compiled dependencies.
# Given the race tests' -race, they compile what the tests then only link,
# so a CI on an empty cache compiles each package once rather than twice
# (no file here depends on the race build tag, so what they check is the
# same); README, "Quick start", has what that saves, measured with
# scripts/cold-ci.sh. CHECKFLAGS= checks a plain build, e.g. with no C
# toolchain for -race.
CHECKFLAGS ?= -race

vet:
	$(GO) vet $(CHECKFLAGS) $(PKGS)

tidy-check:
	@cp go.mod /tmp/weir-go.mod.bak; cp go.sum /tmp/weir-go.sum.bak; \
	$(GO) mod tidy; \
	if ! git diff --quiet -- go.mod go.sum; then \
		echo "go.mod/go.sum are not tidy:"; git --no-pager diff -- go.mod go.sum; \
		cp /tmp/weir-go.mod.bak go.mod; cp /tmp/weir-go.sum.bak go.sum; exit 1; fi

$(LINT):
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(LINT_VER)

lint: $(LINT)
	GOFLAGS="$$GOFLAGS $(CHECKFLAGS)" $(LINT) run $(PKGS)

# Generated protobuf code is committed beside its .proto files (api/weirv1,
# transport and transport/peerpb); proto regenerates it and proto-check
# fails when the committed code is stale or a .proto sits where proto.sh
# does not look. protoc comes from Debian's protobuf-compiler; the Go
# plugins are pinned here.
PROTOC_GEN_GO      := $(BIN)/protoc-gen-go
PROTOC_GEN_GO_GRPC := $(BIN)/protoc-gen-go-grpc
$(PROTOC_GEN_GO):
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
$(PROTOC_GEN_GO_GRPC):
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0

# tools: what lint and proto build on first use; .ci/run builds them while apt
# installs packages.
tools: $(LINT) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) ## build the pinned lint and protoc plugins into bin/

proto: $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)
	PATH=$(BIN):$$PATH ./scripts/proto.sh

proto-check:
	@if ! command -v protoc >/dev/null; then \
		if [ "$$CI" = "true" ]; then echo "protoc missing in CI"; exit 1; fi; \
		echo "proto-check skipped: protoc not installed (apt-get install protobuf-compiler)"; exit 0; fi; \
	stray=$$(find . -name '*.proto' -not -path './api/weirv1/*' -not -path './transport/*' -not -path './bin/*'); \
	if [ -n "$$stray" ]; then echo "proto files outside api/weirv1 and transport: $$stray"; exit 1; fi; \
	tmp=$$(mktemp -d); files=$$(find api transport -name '*.pb.go'); \
	for f in $$files; do mkdir -p $$tmp/$$(dirname $$f); cp $$f $$tmp/$$f; done; \
	$(MAKE) --no-print-directory proto >/dev/null || exit 1; \
	stale=0; for f in $$(find api transport -name '*.pb.go'); do \
		cmp -s $$f $$tmp/$$f || { echo "stale generated file: $$f (run make proto)"; stale=1; }; done; \
	rm -rf $$tmp; exit $$stale

# make bench: one command, one run, one table (bench/README.md). It starts
# every target itself on loopback and writes bench/results/bench.{md,csv,svg,jsonl}.
#   BENCH_SECONDS=N   measured seconds per cell (default 5)
#   BENCH_QUICK=1     a short run (0.3 s cells) into bench/results/quick/
#   BENCH_ROUNDS=N    slices per cell, the targets taking turns (default 5;
#                     1 runs each cell in one piece)
#   BENCH_WARMUP=D    unrecorded warm-up before each slice (default 1s)
#   BENCH_ARGS=...    more `loadgen suite` flags (-callers, -workloads, -targets)
BENCH_SECONDS ?=
BENCH_QUICK   ?=
BENCH_ROUNDS  ?= 5
BENCH_WARMUP  ?= 1s
BENCH_ARGS    ?=
bench: build ## every target side by side in one run: Markdown table, CSV, SVG under bench/results/
	$(GO) build -o $(BIN)/loadgen ./bench/loadgen
	@$(MAKE) --no-print-directory gubernator >$(BIN)/gubernator.build.log 2>&1 || { \
		echo "make bench: Gubernator is not run: bench/gubernator.sh failed; the last lines of bin/gubernator.build.log:"; \
		tail -n 3 $(BIN)/gubernator.build.log; }
	$(BIN)/loadgen suite -weir $(BIN)/weir -gubernator $(BIN)/gubernator $(if $(BENCH_QUICK),-quick -out bench/results/quick, \
		-rounds $(BENCH_ROUNDS) -warmup $(BENCH_WARMUP)) $(if $(BENCH_SECONDS),-seconds $(BENCH_SECONDS)) $(BENCH_ARGS)

# Gubernator v2's server for make bench's gubernator3-* targets, built once
# (bench/gubernator.sh: the v2.21.0 release from the Go module proxy with the
# Go toolchain it asks for, or a checkout given as GUBERNATOR_SRC=DIR).
gubernator: $(BIN)/gubernator ## build Gubernator v2 into bin/ for make bench (once; GUBERNATOR_SRC=DIR for a checkout)
$(BIN)/gubernator:
	bench/gubernator.sh $@

# Replication's cost (docs/placement-and-replication.md): the 3-node client
# cells with replication on and off, side by side in each run, on the bench
# limit (buckets refill within an interval, so nothing is sent) and on
# bench-debt (every changed key is in debt, so every one is sent), REPL_RUNS
# runs each; tables under bench/results/repl/. The worst case (bench-debt,
# uniform keys) is measured twice: after the 1 s warm-up every cell has,
# while the successors' stores still grow, and again after REPL_WARMUP (12 s:
# at tens of thousands of takes a second nearly every one of the 100k keys has been
# taken, so each has a replica and the stores have stopped growing), as
# bench-debt-warm. Each cell is measured in REPL_ROUNDS slices that the two
# targets take in turn (loadgen suite -rounds, as make bench does), each slice
# after its own warm-up (1 s, or REPL_WARMUP for bench-debt-warm).
REPL_RUNS ?= 3
REPL_ROUNDS ?= 4
REPL_WARMUP ?= 12s
bench-repl: build ## replication on vs off (weir3-client vs weir3-client-norepl) at 64 callers, REPL_RUNS runs per limit
	$(GO) build -o $(BIN)/loadgen ./bench/loadgen
	@for l in bench bench-debt bench-debt-warm; do for r in $$(seq 1 $(REPL_RUNS)); do \
		case $$l in *-warm) args="-limit bench-debt -workloads uniform -warmup $(REPL_WARMUP)";; *) args="-limit $$l -warmup 1s";; esac; \
		$(BIN)/loadgen suite -weir $(BIN)/weir $$args -targets weir3-client,weir3-client-norepl -rounds $(REPL_ROUNDS) \
			-callers 64 -seconds $(or $(BENCH_SECONDS),8) -out bench/results/repl/$$l-$$r || exit 1; \
	done; $(BIN)/loadgen spread $$(seq -f "bench/results/repl/$$l-%g/bench.csv" 1 $(REPL_RUNS)) \
		>bench/results/repl/$$l-spread.md || exit 1; done
	@cat bench/results/repl/bench-spread.md bench/results/repl/bench-debt-spread.md bench/results/repl/bench-debt-warm-spread.md

# Issue 19's targets read from several runs (bench/README.md, "The targets,
# several runs"): the cells its targets name (the ceilings, the node over
# HTTP and gRPC, the Go client on one node and on three, Redis + Lua) at 1,
# 16 and 64 callers on every workload, with each ceiling's A/A target (a
# second copy ÷ the first: the method's own scatter), TARGET_RUNS runs one
# after another, then every same-run ratio's median and range over the runs
# (bench/results/targets/spread.md).
TARGET_RUNS    ?= 3
TARGET_CELLS   := ceiling-http-aa,ceiling-http,weir-http,ceiling-grpc-aa,ceiling-grpc,weir-grpc,redis-lua,weir-client,weir3-client
bench-targets: build ## issue 19's target cells, TARGET_RUNS runs, medians and ranges of their ratios
	$(GO) build -o $(BIN)/loadgen ./bench/loadgen
	@rm -rf bench/results/targets; for r in $$(seq 1 $(TARGET_RUNS)); do \
		$(BIN)/loadgen suite -weir $(BIN)/weir -targets $(TARGET_CELLS) -callers 1,16,64 \
			-rounds $(BENCH_ROUNDS) -warmup $(BENCH_WARMUP) -seconds $(or $(BENCH_SECONDS),5) -out bench/results/targets/run-$$r >/dev/null || exit 1; \
	done
	$(BIN)/loadgen spread bench/results/targets/run-*/bench.csv | tee bench/results/targets/spread.md

bench-micro: ## micro-benchmarks beside the code
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./bucket ./lease ./transport

bench-load: ## whole-node load, Weir vs Redis + Lua side by side (bench/README.md)
	bench/run.sh

bench-cluster: ## 3-node cluster vs one node on loopback: takes, forwards, batch sizes, leases (bench/README.md)
	bench/cluster.sh

compose-test: ## 3-node docker cluster: build, exactness, kill the owner (needs docker, curl, jq)
	./deploy/compose-test.sh

JEPSEN_SEED ?= 0
# Scenarios expected to fail because of a known, reported Weir bug, comma
# separated (e.g. 3-allot-none): shown XFAIL and not counted, XPASS once
# fixed. None today.
JEPSEN_XFAIL ?=
jepsen-quick: build ## fault suite (root): 3 nodes through kill, pause, isolate, long partition, the broken-build check + hot key with allotments
	$(GO) build -o $(BIN)/jepsen ./jepsen/cmd/jepsen
	$(BIN)/jepsen -bin $(BIN)/weir -quick -seed $(JEPSEN_SEED) -xfail=$(JEPSEN_XFAIL)

jepsen: build ## the full fault matrix (root): 3 and 5 nodes x every nemesis, and the hot key with allotments
	$(GO) build -o $(BIN)/jepsen ./jepsen/cmd/jepsen
	$(BIN)/jepsen -bin $(BIN)/weir -nodes 3,5 -faults all -seed $(JEPSEN_SEED) -xfail=$(JEPSEN_XFAIL)

# A rolling upgrade from FROM (a git ref at or after the versioned peer
# protocol; README, "Upgrades"): scripts/build-ref.sh builds it in a
# temporary git worktree into bin/weir-from, every node of a 3-node cluster
# starts from it, and under load each in turn leaves gracefully and starts
# again as bin/weir, with graceful leave's excess, lease and linearizability
# checkers.
jepsen-upgrade: build ## rolling upgrade FROM=<git ref> to this tree (root): 3 nodes replaced one at a time under load
	@if [ -z "$(FROM)" ]; then echo "jepsen-upgrade: set FROM=<git ref>, e.g. make jepsen-upgrade FROM=v0.1.0"; exit 2; fi
	$(GO) build -o $(BIN)/jepsen ./jepsen/cmd/jepsen
	./scripts/build-ref.sh $(FROM) $(BIN)/weir-from
	$(BIN)/jepsen -bin $(BIN)/weir -from-bin $(BIN)/weir-from -nodes 3 -faults upgrade -seed $(JEPSEN_SEED)

# The soak (jepsen/README.md, "The soak"): 3 real nodes in network namespaces
# for SOAK_DURATION at half the capacity calibrated at its start (or
# SOAK_RATE takes/s), a join, a graceful leave and a kill in turn every
# SOAK_EVERY; RSS, goroutines and open files must stay flat (first vs last
# 5 minutes), the load get no error answer, every recorded key stay within
# its excess bound. Not part of make test. Heavy: run it alone, under
# flock /work/heavy.lock on a shared machine.
SOAK_DURATION ?= 30m
SOAK_EVERY    ?= 3m
SOAK_RATE     ?=
soak: build ## 3 nodes for SOAK_DURATION (30m) at half capacity, join/leave/kill every SOAK_EVERY (root): flat resources, no errors
	$(GO) build -o $(BIN)/jepsen ./jepsen/cmd/jepsen
	$(BIN)/jepsen -bin $(BIN)/weir -faults soak -duration $(SOAK_DURATION) -soak-every $(SOAK_EVERY) \
		$(if $(SOAK_RATE),-soak-rate $(SOAK_RATE)) -seed $(JEPSEN_SEED)

# The same scenarios and checkers against deploy/docker-compose.yml (3 nodes),
# on the image built like compose-test builds it (FROM scratch, static binary).
# Not part of `make test`. Kept: the image $(JEPSEN_IMAGE); removed: every
# container and network of the project weir-jepsen, after each scenario.
JEPSEN_IMAGE  ?= weir:jepsen
JEPSEN_COMPOSE_FAULTS ?= kill,pause,isolate,long-partition,split,ring,loss,leave,skew,broken
jepsen-compose: ## the fault matrix against the deploy/ docker compose cluster (root, docker, nsenter)
	$(MAKE) --no-print-directory image IMAGE=$(JEPSEN_IMAGE)
	$(GO) build -o $(BIN)/jepsen ./jepsen/cmd/jepsen
	$(BIN)/jepsen -compose deploy/docker-compose.yml -image $(JEPSEN_IMAGE) -faults $(JEPSEN_COMPOSE_FAULTS) -seed $(JEPSEN_SEED)

# Exactness under overload at the issue's length (docs/architecture.md §6.3.1): three
# real nodes, 24 callers on one key and the CPU saturated by spinning processes for 20 s.
# Its 4 s form runs inside make test. Heavy: run it alone.
overload: ## three real nodes on a saturated CPU for 20 s: excess 0, every request answered
	WEIR_OVERLOAD=long $(GO) test -count=1 -v -run '^TestBinaryOverloadExact$$' -timeout 5m ./cmd/weir

# The hostile-input suite at full size (hostile/doc.go): 10,000 idle
# connections, slowloris, 1 MiB headers, bad UTF-8, 1M distinct keys,
# oversize gRPC, unread streams, connect storms, bad-token floods, each
# against a real node. The short form runs inside make test.
hostile: ## the hostile-input suite at full size against real nodes
	WEIR_HOSTILE=long $(GO) test -count=1 -v -timeout 30m ./hostile

# Traefik has no Debian package: make traefik builds its v3 binary from the
# Go module proxy into bin/traefik (scripts/traefik-build.sh says how and
# what the build leaves out), unless bin/traefik already is TRAEFIK_VERSION.
# Several minutes from a cold cache, so it is not part of make test;
# make traefik-test runs deploy/traefik with it (node/e2e_traefik_test.go).
TRAEFIK_VERSION ?= v3.7.13
traefik: ## build Traefik TRAEFIK_VERSION from the Go module proxy into bin/traefik
	@if $(BIN)/traefik version 2>/dev/null | grep -q '^Version: *$(TRAEFIK_VERSION)$$'; then \
		echo "traefik: bin/traefik is $(TRAEFIK_VERSION)"; \
	else TRAEFIK_VERSION=$(TRAEFIK_VERSION) OUT=$(BIN)/traefik GO=$(GO) scripts/traefik-build.sh; fi

traefik-test: traefik ## run deploy/traefik with the real Traefik against a real node
	WEIR_TRAEFIK_TEST=1 WEIR_TRAEFIK=$(BIN)/traefik $(GO) test -race -count=1 -v -run 'Traefik' ./node

# Every fuzz target for FUZZTIME (default 10m) each; FUZZJOBS targets at a
# time with FUZZWORKERS workers each (scripts/fuzz-long.sh says more). It fails
# only when a target writes a crasher to its package's testdata/fuzz.
fuzz-long: ## every fuzz target for FUZZTIME (default 10m) each
	GO=$(GO) scripts/fuzz-long.sh

clean:
	rm -rf bin dist

# QUBIQ Edge — build, run and test. `make run` and `make test` work on a fresh
# Debian machine: they install what they need (Debian packages with apt-get
# when missing, Go modules through the module proxy).

GO      ?= go
BIN     := bin
# The interpreter the workers run in development: a real executable resolved
# once (never a version-manager shim, which costs most of a second per start).
PYTHON  ?= $(shell readlink -f /usr/bin/python3 2>/dev/null)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X qubiq.dev/edge/daemon.Version=$(VERSION) -X main.version=$(VERSION)
PKGS    := ./...
# PostgreSQL for system.db tests: the role and database scripts/ensure-deps.sh makes.
export QUBIQ_TEST_PG_DSN ?= postgres://qubiq_test:qubiq_test@127.0.0.1:5432/qubiq_test?sslmode=disable

.PHONY: all build run test test-unit test-integration test-long bench bench-modbus bench-api bench-sandbox bench-opcua lint deps deps-go deps-system clean

all: build

# qubiqd is linked beside its place and copied there: the Go linker writes
# its output through a shared mapping, which leaves the file's page cache in
# 2 MiB folios that the kernel maps whole into a process at each fault,
# where an executable installed by dpkg or read back from disk is mapped
# 64 KiB at a time. Run from the linker's file, qubiqd would hold ~7 MiB
# more of its executable resident than on an appliance (bench/README.md,
# bench-footprint). The rename leaves a running bin/qubiqd alone.
copy-in = cp $(1).link $(1).new && mv -f $(1).new $(1) && rm -f $(1).link

build: deps-go console
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/qubiqd.link ./cmd/qubiqd
	$(call copy-in,$(BIN)/qubiqd)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/qubiqctl ./cmd/qubiqctl

# The demo runs from a copy of examples/demo in var/ (made at the first run;
# delete var/ to start afresh), so the store, project imports and script
# pushes never rewrite tracked files. LISTEN=host:port (a make variable or an
# environment variable) serves the API there instead of the config's
# http.listen, and DIAG_LISTEN=host:port|off the diagnostics listener
# (metrics) instead of diagnostics.listen, without editing any file: qubiqd
# reads them as QUBIQ_HTTP_LISTEN and QUBIQ_DIAGNOSTICS_LISTEN
# (docs/config.md, "Environment").
LISTEN      ?=
DIAG_LISTEN ?=
DEMO        := var
run: build
	@scripts/ensure-deps.sh demo
	@if [ ! -f $(DEMO)/qubiq.yaml ]; then \
	  mkdir -p $(DEMO) && cp -R examples/demo/. $(DEMO)/ && \
	  echo "make run: copied examples/demo to $(DEMO)/ (edit it there; delete $(DEMO)/ to start afresh)"; fi
	@rm -f $(DEMO)/.run.yaml
	@echo "PYTHON_PATH=$(PYTHON)$(if $(LISTEN), QUBIQ_HTTP_LISTEN=$(LISTEN))$(if $(DIAG_LISTEN), QUBIQ_DIAGNOSTICS_LISTEN=$(DIAG_LISTEN)) $(BIN)/qubiqd --config $(DEMO)/qubiq.yaml"; \
	PYTHON_PATH=$(PYTHON) QUBIQ_HTTP_LISTEN=$(LISTEN) QUBIQ_DIAGNOSTICS_LISTEN=$(DIAG_LISTEN) exec $(BIN)/qubiqd --config $(DEMO)/qubiq.yaml

deps: deps-go deps-system

deps-go:
	$(GO) mod download

# Debian packages the tests and the demo need; installed only when missing.
deps-system:
	@scripts/ensure-deps.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration $(PKGS)
	$(GO) vet -tags bench ./bench/...

# One run: unit tests and the integration tests (build tag `integration`,
# real peers on loopback), all with the race detector; then every fuzz
# target explored for a short bounded time (fuzz-short).
test: deps lint build
	PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(CURDIR)/$(BIN) $(GO) test -race -tags integration -count=1 -timeout 18m $(PKGS)
	@$(MAKE) --no-print-directory fuzz-short

test-unit: deps-go
	PYTHON_PATH=$(PYTHON) $(GO) test -race -count=1 -timeout 15m $(PKGS)

test-integration: deps build
	PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(CURDIR)/$(BIN) $(GO) test -tags integration -count=1 -timeout 15m $(PKGS)

test-long: deps
	PYTHON_PATH=$(PYTHON) $(GO) test -tags 'integration long' -count=1 -timeout 60m $(PKGS)

# Benchmarks run their peers side by side and end with one line
# `bench-NAME: key=value ...` (bench/README.md says how to read them).
bench: bench-modbus bench-api bench-sandbox bench-opcua

bench-modbus: deps build
	PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(CURDIR)/$(BIN) bench/modbus/run.sh

bench-api: deps build
	PYTHON_PATH=$(PYTHON) bench/api/run.sh

bench-sandbox: deps build
	PYTHON_PATH=$(PYTHON) bench/sandbox/run.sh

bench-opcua: deps build
	bench/opcua/run.sh

clean:
	rm -rf $(BIN) build var

# --- appliance: .deb and signed firmware bundle (docs/appliance.md) ---
# PKG_VERSION must be semantic (1.2.3); PKG_ARCH another GOARCH needs
# PKG_RUNTIME, a runtime dir built on that architecture (go run ./packaging runtime).
PKG_VERSION      ?= 0.1.0
PKG_ARCH         ?= $(shell $(GO) env GOARCH)
PKG_OUT          ?= build/package
PKG_RUNTIME      ?=
PKG_TRUSTED_KEYS ?= packaging/keys/dev-firmware-signing.pub
PKG_KEY          ?= packaging/keys/dev-firmware-signing.key
PKG_MIN_FROM     ?=

.PHONY: package
package: deps-go
	$(GO) run ./packaging package --version $(PKG_VERSION) --arch $(PKG_ARCH) --out $(PKG_OUT) \
	  --trusted-keys $(PKG_TRUSTED_KEYS) $(if $(PKG_RUNTIME),--runtime $(PKG_RUNTIME))

.PHONY: bundle
bundle: package
	@chmod 600 $(PKG_KEY) # git does not keep the key file's mode
	$(GO) run ./packaging bundle --version $(PKG_VERSION) --arch $(PKG_ARCH) --out $(PKG_OUT) \
	  --key $(PKG_KEY) $(if $(PKG_MIN_FROM),--min-from $(PKG_MIN_FROM))

# Fuzz targets (testing.F). `make test` runs each target's seeds (the
# f.Add values and the package's testdata/fuzz/<Target>/ files) as ordinary
# tests, then explores each for FUZZ_SHORT inputs (fuzz-short, about 2 min in
# all); `make fuzz` explores each target for FUZZTIME, one after the other
# (go test fuzzes one target per run). A failing input is written to the
# package's testdata/fuzz: commit it, it becomes a seed.
FUZZTIME ?= 60s
FUZZ_TARGETS := ./config:FuzzParseProject ./config:FuzzReadTagsCSV ./config:FuzzTagScalars \
	./device/opcua:FuzzDecodeDataValue ./device/modbus:FuzzResponse ./device/modbus:FuzzReadRTUFrame \
	./sandbox/rpc:FuzzReadFrames ./sandbox/rpc:FuzzWriteMessages ./sandbox/rpc:FuzzPickleValue ./api:FuzzDecodeBody ./mqtt:FuzzDecodeEnvelope \
	./store:FuzzDecodeRecord ./config:FuzzFastFlowItem

# fuzz-short is `make test`'s bounded pass: each target for FUZZ_SHORT
# executions (a count, not a duration: with a -fuzztime duration Go 1.26's
# coordinator can report "context deadline exceeded" as a failure when the
# time runs out while a worker is mid-input, golang/go#75804, fixed in Go
# 1.27; a count has no deadline to race). 30000 is 2–40 s a target here.
FUZZ_SHORT ?= 30000x
.PHONY: fuzz-short
fuzz-short: deps-go
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn for $(FUZZ_SHORT)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_SHORT) $$pkg || exit 1; \
	done

.PHONY: fuzz
fuzz: deps-go
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$pkg $$fn for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

# The engineer's console (api/console, docs/console.md): `npm ci` installs the
# pinned CodeMirror 6 and esbuild packages (api/console/package-lock.json),
# then api/console/build.mjs bundles src/ into dist/console.js with its
# licences, which go:embed puts into qubiqd. It runs before every `go build`
# of `make build`, and again only when a source or the lock file changed. A
# plain `go build ./...` compiles without it: that binary serves a page at
# /console/ saying the bundle is missing.
CONSOLE     := api/console
CONSOLE_SRC := $(shell find $(CONSOLE)/src -type f 2>/dev/null) $(CONSOLE)/build.mjs
.PHONY: console
console: $(CONSOLE)/dist/console.js

$(CONSOLE)/node_modules/.package-lock.json: $(CONSOLE)/package.json $(CONSOLE)/package-lock.json
	@command -v npm >/dev/null 2>&1 || scripts/ensure-deps.sh build
	cd $(CONSOLE) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CONSOLE)/dist/console.js: $(CONSOLE)/node_modules/.package-lock.json $(CONSOLE_SRC)
	cd $(CONSOLE) && node build.mjs

# The appliance package's qubiqd carries the console too (its go build embeds
# what dist/ holds).
package: console

.PHONY: clean-console
clean: clean-console
clean-console:
	rm -rf $(CONSOLE)/node_modules $(CONSOLE)/dist/console.js $(CONSOLE)/dist/LICENSES.txt

# Flows (issue 13): the same flow in qubiqd and in Node-RED 4.1.8, one after
# the other against one pymodbus server (bench/README.md, bench-flows).
.PHONY: bench-flows
bench: bench-flows
bench-flows: deps build
	PYTHON_PATH=$(PYTHON) bench/flows/run.sh
# Alarms (issue 16): bench/alarms/run.sh, bench/README.md "bench-alarms".
.PHONY: bench-alarms
bench: bench-alarms
bench-alarms: deps build
	PYTHON_PATH=$(PYTHON) bench/alarms/run.sh

# LiveView (docs/liveview.md): the panel's end-to-end run in headless
# Chromium (integration/liveview_test.go; it installs Debian's chromium and
# the pinned playwright-core when missing). Screenshots at 1280×800 land in
# build/test-artifacts/liveview/.
.PHONY: e2e-liveview
e2e-liveview:
	cd integration && go test -tags integration -count=1 -run 'TestLiveView' .
# Whole-process benchmarks of issue 18 (bench/README.md): the real qubiqd
# measured from /proc by bench/harness. Every run.sh records its lines in
# build/bench/results.json (bench/record.sh).
.PHONY: bench-footprint
bench: bench-footprint
bench-footprint: deps build
	PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(CURDIR)/$(BIN) bench/footprint/run.sh
.PHONY: bench-devices bench-engine
bench: bench-devices bench-engine
bench-devices: deps build
	PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(CURDIR)/$(BIN) bench/devices/run.sh
bench-engine: deps
	bench/engine/run.sh
# CPU (and, for qubiqd, heap) profiles of a benchmark into build/bench/profiles
# (bench/README.md, "Profiles"). The whole-process ones run a qubiqd built with
# -tags benchprofile, which serves net/http/pprof on the loopback address the
# harness gives it (QUBIQ_BENCH_PPROF); release builds have none of it.
PROFDIR := $(CURDIR)/build/bench/profiles
PROFBIN := $(CURDIR)/build/bench/profbin
.PHONY: profile-bin profile-footprint profile-devices profile-modbus profile-engine profile-sandbox
profile-bin: deps-go
	$(GO) build -tags benchprofile -ldflags "$(LDFLAGS)" -o $(PROFBIN)/qubiqd.link ./cmd/qubiqd
	$(call copy-in,$(PROFBIN)/qubiqd)
profile-footprint: deps profile-bin
	BENCH_PROFILE=footprint BENCH_PROFILE_DIR=$(PROFDIR) BENCH_SIZES=$${BENCH_SIZES:-10000} \
	  PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(PROFBIN) bench/footprint/run.sh
profile-devices: deps profile-bin
	BENCH_PROFILE=devices BENCH_PROFILE_DIR=$(PROFDIR) PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(PROFBIN) bench/devices/run.sh
profile-modbus: deps profile-bin
	BENCH_PROFILE=modbus BENCH_PROFILE_DIR=$(PROFDIR) BENCH_RUNS=1 PYTHON_PATH=$(PYTHON) QUBIQ_BIN=$(PROFBIN) bench/modbus/run.sh
profile-engine: deps-go
	mkdir -p $(PROFDIR)
	taskset -c 0 $(GO) test -run '^$$' -bench '^BenchmarkEngineCeiling$$' -benchmem -cpu 1 -benchtime 3s \
	  -cpuprofile $(PROFDIR)/engine.cpu.pprof -o $(PROFDIR)/tagengine.test ./tagengine
profile-sandbox: deps build
	mkdir -p $(PROFDIR)
	BENCH_RUNS=1 BENCH_CPUPROFILE=$(PROFDIR)/sandbox.cpu.pprof PYTHON_PATH=$(PYTHON) bench/sandbox/run.sh
# The MQTT supervisor link (issue 12): bench/mqtt/run.sh, bench/README.md "bench-mqtt".
.PHONY: bench-mqtt
bench: bench-mqtt
bench-mqtt: deps build
	bench/mqtt/run.sh
# A CPU profile of qubiqd over bench-mqtt's QoS 0 window (mqtt-qos0-qubiqd.cpu.pprof).
.PHONY: profile-mqtt
profile-mqtt: deps profile-bin
	BENCH_PROFILE=mqtt BENCH_PROFILE_DIR=$(PROFDIR) BENCH_RUNS=1 QUBIQ_BIN=$(PROFBIN) bench/mqtt/run.sh

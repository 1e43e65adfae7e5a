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

.PHONY: all build cross deps man completions install uninstall dist generate check-generated test test-short bench soak soak-agent fuzz fmt vet lint examples demo demo-java clean

all: build

build: $(BIN)

$(BIN): FORCE
	$(GOBUILD) -o $(BIN) ./cmd/leakscope

FORCE:

## cross: build for the platforms that read captures but do not trace
## (report, diff and report --http work there; run, attach and doctor exit 2:
## tracing is validated on linux/amd64 only, though linux/arm64 has its BPF
## object), and vet them for macOS.
## cmd/leakscope/crossbuild_test.go builds the same list.
CROSS := darwin/amd64 windows/amd64 linux/arm64
cross:
	@set -e; for t in $(CROSS); do \
		echo "GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -o bin/cross/$${t%/*}-$${t#*/}/ ./cmd/leakscope"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -o bin/cross/$${t%/*}-$${t#*/}/ ./cmd/leakscope; \
	done
	GOOS=darwin $(GO) vet ./...

## deps: the Debian 12 packages the build, make generate and make test need,
## and the Go modules (as root, or with sudo; installs only what is missing).
## Go itself is not among them: Debian's golang is too old for go.mod (README.md).
## For tests: chromium report/browser_test.go; bpftool and capsh (libcap2-bin)
## cmd/leakscope/reliability_linux_test.go; javac probe/jvm_linux_test.go and
## probe/jvm; libnetty-java probe/nettyleak_linux_test.go (Netty 4.1.48); man-db
## and bash-completion cmd/leakscope/install_linux_test.go; libbz2-dev, libssl-dev and zlib1g-dev
## the examples the --track presets and zlib tests build; debuginfod (elfutils'
## server) probe/symbolize/debuginfod_test.go and cmd/leakscope/debuginfod_linux_test.go;
## nodejs and gdb (its ground truth) probe/nodezlib_linux_test.go;
## prometheus cmd/leakscope/agent_linux_test.go (the agent scraped by a real one);
## libjemalloc2, libgoogle-perftools4 (tcmalloc), libmimalloc2.0 and musl-tools
## probe/allocators_linux_test.go and probe/probesite_linux_test.go (each allocator's
## probe sites) and bench/probesites.sh; valgrind probe/valgrind_linux_test.go (the
## oracle for Debian's programs); redis-server probe/redis_linux_test.go (installed
## with a policy-rc.d that keeps its service from starting: the test runs its own);
## gcc-aarch64-linux-gnu probe/unwind/rule_test.go (AArch64 unwind rules of
## cross-compiled programs); qemu-system-arm and qemu-system-x86 (without their
## recommends) and the pinned arm64 and amd64 kernel images, which
## ebpf/include/fetch-kernel.sh fetches from Debian's mirror into
## ~/.cache/leakscope (XDG_CACHE_HOME), probe/kernel/vm_linux_test.go (the BPF
## objects loaded, and a trace made, by Debian 12's 6.1 kernels under qemu).
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
# MISSING sets need to the packages not installed, norec to those installed
# without their recommends (qemu's are a GUI and firmware the tests do not
# use), fetch to the architectures whose kernel image is not cached; deps
# and test use it.
define MISSING
need=; \
command -v clang-19 >/dev/null || need="$$need clang-19"; \
command -v llvm-strip-19 >/dev/null || need="$$need llvm-19"; \
command -v gcc >/dev/null || need="$$need gcc"; \
command -v make >/dev/null || need="$$need make"; \
command -v git >/dev/null || need="$$need git"; \
[ -f /usr/include/zlib.h ] || need="$$need zlib1g-dev"; \
command -v chromium >/dev/null || need="$$need chromium"; \
[ -f /usr/include/bzlib.h ] || need="$$need libbz2-dev"; \
[ -f /usr/include/openssl/ssl.h ] || need="$$need libssl-dev"; \
command -v bpftool >/dev/null || need="$$need bpftool"; \
command -v capsh >/dev/null || need="$$need libcap2-bin"; \
command -v javac >/dev/null || need="$$need openjdk-17-jdk-headless"; \
[ -f /usr/share/java/netty-buffer.jar ] || need="$$need libnetty-java"; \
command -v man >/dev/null || need="$$need man-db"; \
[ -f /usr/share/bash-completion/bash_completion ] || need="$$need bash-completion"; \
command -v musl-gcc >/dev/null || need="$$need musl-tools"; \
[ -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need="$$need libjemalloc2"; \
[ -f /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 ] || need="$$need libgoogle-perftools4"; \
[ -f /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 ] || need="$$need libmimalloc2.0"; \
command -v debuginfod >/dev/null || need="$$need debuginfod"; \
command -v node >/dev/null || need="$$need nodejs"; \
command -v gdb >/dev/null || need="$$need gdb"; \
command -v prometheus >/dev/null || need="$$need prometheus"; \
command -v valgrind >/dev/null || need="$$need valgrind"; \
command -v aarch64-linux-gnu-gcc >/dev/null || need="$$need gcc-aarch64-linux-gnu"; \
command -v redis-server >/dev/null || need="$$need redis-server"; \
norec=; \
command -v qemu-system-aarch64 >/dev/null || norec="$$norec qemu-system-arm"; \
command -v qemu-system-x86_64 >/dev/null || norec="$$norec qemu-system-x86"; \
fetch=; \
for arch in arm64 amd64; do [ -f "$$(sh ebpf/include/fetch-kernel.sh $$arch --path)" ] || fetch="$$fetch $$arch"; done;
endef
deps:
	@$(MISSING) \
	if [ -n "$$need$$norec" ]; then \
		echo "make deps: apt-get install$$need$${norec:+ (without recommends:$$norec)}"; \
		policy=; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			policy=/usr/sbin/policy-rc.d; \
			printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee $$policy >/dev/null && $(SUDO) chmod 755 $$policy; \
		fi; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		{ [ -z "$$need" ] || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; } && \
		{ [ -z "$$norec" ] || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$norec >/dev/null; }; \
		rc=$$?; [ -z "$$policy" ] || $(SUDO) rm -f $$policy; [ $$rc -eq 0 ] || exit $$rc; \
	fi; \
	for arch in $$fetch; do echo "make deps: fetch the $$arch kernel image (sh ebpf/include/fetch-kernel.sh $$arch)"; sh ebpf/include/fetch-kernel.sh $$arch >/dev/null || exit; done
	@$(GO) mod download

## man, completions: the man pages and the bash, zsh and fish completion
## scripts, generated by the built binary from its command tree into $(GEN)
GEN := bin/gen
man: build
	@rm -rf $(GEN)/man
	$(BIN) __man $(GEN)/man

completions: build
	@mkdir -p $(GEN)/completions
	$(BIN) completion bash >$(GEN)/completions/leakscope.bash
	$(BIN) completion zsh >$(GEN)/completions/_leakscope
	$(BIN) completion fish >$(GEN)/completions/leakscope.fish

## install: the static binary, man pages and completions under
## $(DESTDIR)$(PREFIX) (default /usr/local)
PREFIX  ?= /usr/local
DESTDIR ?=
BASHDIR := $(PREFIX)/share/bash-completion/completions
ZSHDIR  := $(PREFIX)/share/zsh/site-functions
FISHDIR := $(PREFIX)/share/fish/vendor_completions.d
MAN1DIR := $(PREFIX)/share/man/man1
install: build man completions
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MAN1DIR) $(DESTDIR)$(BASHDIR) $(DESTDIR)$(ZSHDIR) $(DESTDIR)$(FISHDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/leakscope
	install -m 0644 $(GEN)/man/*.1 $(DESTDIR)$(MAN1DIR)/
	install -m 0644 $(GEN)/completions/leakscope.bash $(DESTDIR)$(BASHDIR)/leakscope
	install -m 0644 $(GEN)/completions/_leakscope $(DESTDIR)$(ZSHDIR)/_leakscope
	install -m 0644 $(GEN)/completions/leakscope.fish $(DESTDIR)$(FISHDIR)/leakscope.fish

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/leakscope $(DESTDIR)$(MAN1DIR)/leakscope.1 $(DESTDIR)$(MAN1DIR)/leakscope-*.1 \
		$(DESTDIR)$(BASHDIR)/leakscope $(DESTDIR)$(ZSHDIR)/_leakscope $(DESTDIR)$(FISHDIR)/leakscope.fish

## dist: bin/dist/leakscope-VERSION-linux-ARCH.tar.gz per DIST_ARCHS (binary,
## man pages, completions, README.md) and their SHA256SUMS. Entries are sorted,
## owned by root and dated at the commit; with SOURCE_DATE_EPOCH set (the
## build date) a tarball is the same byte for byte on a rebuild. Only amd64:
## the tracer is built for amd64 alone, so an arm64 build (make cross) reads
## captures but cannot trace (its BPF object loads on an arm64 kernel:
## probe/kernel/vm_linux_test.go).
DIST       := bin/dist
DIST_ARCHS ?= amd64
DIST_MTIME := $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
dist: man completions
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for arch in $(DIST_ARCHS); do \
		name=leakscope-$(VERSION)-linux-$$arch; \
		mkdir -p $(DIST)/$$name; \
		echo "GOOS=linux GOARCH=$$arch $(GOBUILD) -o $(DIST)/$$name/leakscope ./cmd/leakscope"; \
		GOOS=linux GOARCH=$$arch $(GOBUILD) -o $(DIST)/$$name/leakscope ./cmd/leakscope; \
		cp -R $(GEN)/man $(GEN)/completions $(DIST)/$$name/; \
		cp README.md $(DIST)/$$name/; \
		tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@$(DIST_MTIME) \
			-C $(DIST) -cf - $$name | gzip -n >$(DIST)/$$name.tar.gz; \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum *.tar.gz >SHA256SUMS && cat SHA256SUMS

## generate: rebuild the BPF objects (needs clang-19: apt-get install -y clang-19 llvm-19)
generate:
	$(GO) generate ./probe/...

## check-generated: fail if the committed BPF objects are stale, or a
## generated one is not committed
GENERATED := 'probe/kernel/*_bpfel.go' 'probe/kernel/*_bpfel.o' 'probe/internal/bpftest/*_bpfel.go' 'probe/internal/bpftest/*_bpfel.o'
check-generated: generate
	@stale=$$(git status --porcelain --untracked-files=all -- $(GENERATED)); \
	if [ -n "$$stale" ]; then echo "$$stale"; echo "BPF objects are stale or not committed: run make generate and commit" >&2; exit 1; fi

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
	./$(BIN) run --top 3 --duration 5s -- ./$(EXAMPLES)/leaky --forever

## demo-java: the Kafka incident: a JVM (no flags) leaking GZIPInputStreams, traced by
## leakscope run; needs a JDK (javac, java) and root; JAVA picks the JVM it runs on
## (make demo-java JAVA=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java)
JAVA ?= java
demo-java: build
	@mkdir -p bin/java
	javac -d bin/java examples/java/KafkaRecovery.java
	./$(BIN) run --top 1 -- $(JAVA) -cp bin/java KafkaRecovery

## test: every test; the BPF tests run as root and skip with a reason otherwise,
## and so do those whose Debian package is missing, which this names first
test:
	@$(MISSING) \
	[ -z "$$need$$norec" ] || echo "make test: not installed:$$need$$norec; the tests that need them skip or fail (make deps installs them)" >&2; \
	[ -z "$$fetch" ] || echo "make test: missing the kernel image of:$$fetch (sh ebpf/include/fetch-kernel.sh ARCH); probe/kernel's guest tests skip or fail (make deps fetches it)" >&2
	$(GO) vet ./...
	# Hermetic: a DEBUGINFOD_URLS of the machine's (Debian's
	# /etc/profile.d/debuginfod.sh) would make every traced test fetch
	# from the internet; the debuginfod tests start their own server.
	# The timeout is a hang guard: cmd/leakscope takes ~13 min on an idle
	# machine of this kind, over 30 on a slow one.
	env -u DEBUGINFOD_URLS $(GO) test -count=1 -timeout 50m ./...

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
## (needs root; ~10 min; writes bench/results-DATE-COMMIT.md, see docs/performance.md)
bench:
	bash bench/run.sh

## soak: churn --forever under leakscope run for SOAK_SECONDS (default 600);
## checks exact counts, no losses and a flat RSS (needs root; not in make test;
## results in bin/soak/, see docs/reliability.md)
SOAK_SECONDS ?= 600
soak:
	SOAK_SECONDS=$(SOAK_SECONDS) bash bench/soak.sh

## soak-agent: leakscope agent for SOAK_SECONDS (default 600) over TARGETS (20)
## churning and leaking processes, each stopped and started again every
## LIFE_SECONDS (300) at staggered times, scraped as Prometheus and Parca
## would; checks exact counts, attach/detach, no link left behind and a flat
## RSS, and measures the overhead on churn (needs root and bpftool; not in
## make test; results in bin/soak-agent/, see docs/agent.md#soak)
soak-agent:
	SOAK_SECONDS=$(SOAK_SECONDS) bash bench/soak-agent.sh

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '_bpfel.go$$')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin

# The same program 10 times, half of them with every core busy: the same
# rank order and classes each time (docs/how-it-works.md#verdict-what-each-class-means).
.PHONY: verdict-repeat
verdict-repeat:
	go test -count=1 -v -run 'TestVerdictRepeatable' ./cmd/leakscope/

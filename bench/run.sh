#!/usr/bin/env bash
# bench/run.sh - leakscope's performance harness (make bench); method and
# results in docs/performance.md.
#
# In one run it builds leakscope and the storms of examples/bench/, then runs
# REPS repetitions; each repetition runs every storm under every tool, in an
# order rotated by repetition (bare, leakscope exact, leakscope sampled,
# heaptrack, bpftrace). Then it
# measures what the timed runs cannot (fixed costs, BPF map memory, per-probe
# program time), runs the Go benchmarks, and writes
# bench/results-YYYY-MM-DD-COMMIT.md via bench/report.py. Raw outputs stay in
# bin/bench/run-<stamp>/.
#
# Environment:
#   REPS=5             repetitions of every (storm, tool) pair
#   TOOLS="bare leakscope sampled nomalloc floor floorsampled heaptrack bpftrace"
#                      (nomalloc: leakscope --malloc off; floor and
#                      floorsampled: leakscope --probes-only, exact and
#                      sampled: the same probes with programs that return at
#                      once, what the probes alone cost)
#   SAMPLE_BYTES=512KiB  --sample-bytes of the "sampled" tool (leakscope)
#   STORMS="alloc zlib"
#   GOBENCH=1          run the Go benchmarks (0 skips them)
#   BPF_STATS=1        one extra run with kernel.bpf_stats_enabled=1 for the
#                      per-program breakdown (restored afterwards)
#   INSTALL=1          apt-get the missing tools (time heaptrack bpftrace ...)
#   OUT=bench/results-<UTC date>-<commit>.md   where the summary goes (-2,
#                      -3, ... added when that file exists: an earlier run
#                      is kept)
#   PHASES="timed fixed memory stats progtime stacks kafka redis go maps"   the parts to run;
#                      "stacks" is leakscope's own memory at 1M live
#                      allocations on 100k stacks (bench/stacks.sh with
#                      --save, then leakscope report in every format), its
#                      default --memory-limit and --memory-limit 0
#                      alternated, STACKS_REPS times each (default 3);
#                      "kafka" is the JVM throughput comparison (KAFKA_MS,
#                      KAFKA_RECORDS); "redis" is Debian's redis-server under
#                      redis-benchmark with leakscope attached in each mode
#                      (bench/redis.sh, REDIS_REPS rounds, default REPS, of
#                      REDIS_REQUESTS); "maps" is what --maps costs on the
#                      allocation storm and a mapping storm (bench/maps.sh,
#                      MAPS_REPS times, default REPS)
#   "progtime" is the BPF programs' own ns per run of alloc_session and
#                      the free program on the alloc storm, 1 and 2 threads
#                      (bench/progtime.sh, PROGTIME_REPS times, default 3;
#                      PROGTIME_OLD=BINARY also runs that build, alternated)
#   RAW=bin/bench/run-<stamp>   the raw-results directory; point it at an
#                      earlier run with a subset of PHASES to complete it
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-5}
TOOLS=${TOOLS:-"bare leakscope sampled nomalloc floor floorsampled heaptrack bpftrace"}
SAMPLE_BYTES=${SAMPLE_BYTES:-512KiB}
STORMS=${STORMS:-"alloc zlib"}
GOBENCH=${GOBENCH:-1}
BPF_STATS=${BPF_STATS:-1}
INSTALL=${INSTALL:-1}

PHASES=${PHASES:-"timed fixed memory stats progtime stacks kafka redis go maps"}
STACKS_REPS=${STACKS_REPS:-3}
[ "$GOBENCH" = 1 ] || PHASES=${PHASES/go/}
[ "$BPF_STATS" = 1 ] || PHASES=${PHASES/stats/}
RAW=${RAW:-bin/bench/run-$(date -u +%Y%m%dT%H%M%SZ)}
if [ -z "${OUT:-}" ]; then
	# Named by date and the commit measured; never over an earlier run's
	# results: a second run of the same commit on the same day gets -2, -3, ...
	name=bench/results-$(date -u +%Y-%m-%d)-$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
	OUT=$name.md
	n=2
	while [ -e "$OUT" ]; do
		OUT=$name-$n.md
		n=$((n + 1))
	done
fi
mkdir -p "$RAW"
echo "== raw results in $RAW"

note() { echo "$*" | tee -a "$RAW/notes.txt"; }
phase() { [[ " $PHASES " == *" $1 "* ]]; }
skip() { # tool reason
	echo "$2" >"$RAW/skip.$1"
	note "skip $1: $2"
}

# ---------------------------------------------------------------- tools
need=()
[ -x /usr/bin/time ] || need+=(time)
command -v python3 >/dev/null || need+=(python3)
command -v addr2line >/dev/null || need+=(binutils)
command -v gcc >/dev/null || need+=(gcc)
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
case " $TOOLS " in *" heaptrack "*) command -v heaptrack >/dev/null || need+=(heaptrack) ;; esac
case " $TOOLS " in *" bpftrace "*) command -v bpftrace >/dev/null || need+=(bpftrace) ;; esac
case " $PHASES " in *" redis "*)
	command -v redis-server >/dev/null || need+=(redis-server)
	command -v redis-benchmark >/dev/null || need+=(redis-tools)
	command -v bpftrace >/dev/null || need+=(bpftrace) ;;
esac
if [ ${#need[@]} -gt 0 ]; then
	if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ]; then
		echo "== apt-get install ${need[*]}"
		export DEBIAN_FRONTEND=noninteractive
		# Debian's redis-server starts its service on 127.0.0.1:6379 as
		# it is installed: a policy-rc.d for the install keeps every
		# service down (the bench runs its own on a private socket).
		policy=
		if [ ! -e /usr/sbin/policy-rc.d ]; then
			policy=/usr/sbin/policy-rc.d
			printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
		fi
		{ apt-get update -qq && apt-get install -y -qq "${need[@]}"; } >"$RAW/apt.log" 2>&1 ||
			note "apt-get install ${need[*]} failed (see $RAW/apt.log)"
		[ -z "$policy" ] || rm -f "$policy"
	else
		note "missing: ${need[*]} (INSTALL=0 or not root)"
	fi
fi
for t in /usr/bin/time python3 addr2line gcc; do
	command -v "$t" >/dev/null || { echo "bench: $t is required" >&2; exit 2; }
done

active=()
for tool in $TOOLS; do
	case $tool in
	bare) ;;
	leakscope | nomalloc | floor | floorsampled)
		[ "$(id -u)" = 0 ] || { skip "$tool" "needs root (CAP_BPF, CAP_PERFMON)"; continue; } ;;
	sampled)
		[ "$(id -u)" = 0 ] || { skip sampled "needs root (CAP_BPF, CAP_PERFMON)"; continue; }
		make build >/dev/null 2>&1 || true
		bin/leakscope run --help 2>&1 | grep -q -- --sample-bytes ||
			{ skip sampled "this leakscope has no --sample-bytes"; continue; } ;;
	heaptrack)
		command -v heaptrack >/dev/null || { skip heaptrack "heaptrack not installed (Debian package heaptrack)"; continue; } ;;
	bpftrace)
		[ "$(id -u)" = 0 ] || { skip bpftrace "needs root"; continue; }
		command -v bpftrace >/dev/null || { skip bpftrace "bpftrace not installed (Debian package bpftrace)"; continue; } ;;
	*) echo "bench: unknown tool $tool" >&2; exit 2 ;;
	esac
	active+=("$tool")
done

# ---------------------------------------------------------------- build
echo "== build"
make build >"$RAW/build.log" 2>&1 || { cat "$RAW/build.log" >&2; exit 2; }
CFLAGS_BENCH=(-O2 -g -Wall -Wextra -fno-omit-frame-pointer -no-pie)
gcc "${CFLAGS_BENCH[@]}" -pthread -o bin/bench/alloc_storm examples/bench/alloc_storm.c
gcc "${CFLAGS_BENCH[@]}" -o bin/bench/zlib_storm examples/bench/zlib_storm.c -lz

# ---------------------------------------------------------------- context
phase timed || [ ! -f "$RAW/context.txt" ] && {
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "kernel=$(uname -r)"
	echo "cpus=$(nproc)"
	echo "cpu=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
	echo "mem_mib=$(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo)"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "dirty_files=$(GIT_OPTIONAL_LOCKS=0 git status --porcelain 2>/dev/null | wc -l)"
	echo "go=$(go env GOVERSION)"
	echo "gcc=$(gcc -dumpfullversion)"
	echo "glibc=$(ldd --version | awk 'NR==1{print $NF}')"
	echo "zlib=$(dpkg-query -W -f='${Version}' zlib1g 2>/dev/null || echo unknown)"
	command -v heaptrack >/dev/null && echo "heaptrack=$(heaptrack --version 2>&1 | awk '{print $NF; exit}')"
	command -v bpftrace >/dev/null && echo "bpftrace=$(bpftrace --version 2>&1 | awk '{print $NF}')"
	echo "reps=$REPS"
	echo "sample_bytes=$SAMPLE_BYTES"
	echo "tools=${active[*]}"
	echo "storms=$STORMS"
	echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$RAW/context.txt"

# ---------------------------------------------------------------- timed runs
storm_bin() { echo "bin/bench/${1}_storm"; }

# run_one STORM TOOL REP: one timed run. Writes $base.{out,err,time,wall}.
run_one() {
	local storm=$1 tool=$2 rep=$3 bin base cmd
	bin=$(storm_bin "$storm")
	base=$RAW/$storm.$tool.$rep
	case $tool in
	bare) cmd=("$bin") ;;
	leakscope) cmd=(bin/leakscope run --progress never --format json -o "$base.json" -- "$bin") ;;
	sampled) cmd=(bin/leakscope run --progress never --format json --sample-bytes "$SAMPLE_BYTES" -o "$base.json" -- "$bin") ;;
	nomalloc) cmd=(bin/leakscope run --progress never --format json --malloc off -o "$base.json" -- "$bin") ;;
	floor) cmd=(bin/leakscope run --progress never --format json --probes-only -o "$base.json" -- "$bin") ;;
	floorsampled) cmd=(bin/leakscope run --progress never --format json --probes-only --sample-bytes "$SAMPLE_BYTES" -o "$base.json" -- "$bin") ;;
	heaptrack) cmd=(heaptrack -o "$base.heaptrack" "$bin") ;;
	bpftrace) cmd=(env BPFTRACE_MAP_KEYS_MAX=16384 bpftrace -o "$base.bt" bench/memleak.bt -c "$bin") ;;
	esac
	echo "$(cut -d' ' -f1 /proc/loadavg)" >"$base.load"
	local t0 t1 rc=0
	t0=$(date +%s%N)
	/usr/bin/time -v -o "$base.time" "${cmd[@]}" >"$base.out" 2>"$base.err" || rc=$?
	t1=$(date +%s%N)
	echo "$((t1 - t0))" >"$base.wall"
	if [ $rc -ne 0 ]; then
		note "$storm/$tool rep $rep exited $rc (see $base.err)"
	fi
	awk -v s="$storm" -v t="$tool" -v r="$rep" -v ns="$((t1 - t0))" 'BEGIN{printf "  %-6s %-10s rep %d: %6.2f s\n", s, t, r, ns / 1e9}'
}

n=${#active[@]}
phase timed && echo "== timed runs: $REPS repetitions of {$STORMS} x {${active[*]}}"
phase timed && for rep in $(seq 1 "$REPS"); do
	for storm in $STORMS; do
		for i in $(seq 0 $((n - 1))); do
			run_one "$storm" "${active[$(((i + rep - 1) % n))]}" "$rep"
		done
	done
done

# ---------------------------------------------------------------- fixed costs
# leakscope's start-up (load, verify, attach) and tear-down (detach, final
# read) around a target that does nothing: /bin/date prints when it ran.
if phase fixed && [[ " ${active[*]} " == *" leakscope "* ]]; then
	echo "== leakscope fixed costs (run -- /bin/date, 3 times)"
	for i in 1 2 3; do
		t0=$(date +%s%N)
		bin/leakscope run --progress never --format json -o "$RAW/fixed.$i.json" -- /bin/date +%s%N >"$RAW/fixed.$i.out" 2>"$RAW/fixed.$i.err"
		t1=$(date +%s%N)
		echo "$t0 $(head -1 "$RAW/fixed.$i.out") $t1" >"$RAW/fixed.$i.times"
	done
fi

# ---------------------------------------------------------------- memory
# sample_tool PID FILE: every 0.1 s until PID exits, append the BPF map
# memory it holds (memlock of its bpf-map fds, the number `bpftool map
# show` prints), its VmHWM and its own CPU ticks.
sample_tool() {
	local pid=$1 file=$2 fd sum link hwm cpu m
	while kill -0 "$pid" 2>/dev/null; do
		sum=0
		for fd in /proc/"$pid"/fd/*; do
			link=$(readlink "$fd" 2>/dev/null) || continue
			if [ "$link" = "anon_inode:bpf-map" ]; then
				# The fd may be closed and reused between the two reads.
				m=$(awk '/^memlock:/{print $2}' /proc/"$pid"/fdinfo/"${fd##*/}" 2>/dev/null || true)
				[[ $m =~ ^[0-9]+$ ]] && sum=$((sum + m))
			fi
		done
		hwm=$(awk '/^VmHWM:/{print $2}' /proc/"$pid"/status 2>/dev/null || echo 0)
		cpu=$(awk '{print $14 + $15}' /proc/"$pid"/stat 2>/dev/null || echo 0)
		echo "$sum ${hwm:-0} ${cpu:-0}" >>"$file"
		sleep 0.1
	done
}

phase memory && for storm in $STORMS; do
	bin=$(storm_bin "$storm")
	if [[ " ${active[*]} " == *" leakscope "* ]]; then
		echo "== memory: leakscope on $storm storm (untimed)"
		bin/leakscope run --progress never --format json -o "$RAW/mem.$storm.leakscope.json" -- "$bin" >/dev/null 2>"$RAW/mem.$storm.leakscope.err" &
		sample_tool $! "$RAW/mem.$storm.leakscope.samples"
		wait $! || true
	fi
	if [[ " ${active[*]} " == *" bpftrace "* ]]; then
		echo "== memory: bpftrace on $storm storm (untimed)"
		env BPFTRACE_MAP_KEYS_MAX=16384 bpftrace -o "$RAW/mem.$storm.bpftrace.bt" bench/memleak.bt -c "$bin" >/dev/null 2>"$RAW/mem.$storm.bpftrace.err" &
		sample_tool $! "$RAW/mem.$storm.bpftrace.samples"
		wait $! || true
	fi
done

# ---------------------------------------------------------------- per-probe cost
# One run of the alloc storm on one thread with kernel.bpf_stats_enabled=1:
# the kernel then counts every program's runs and run time (fdinfo
# run_cnt/run_time_ns). The storm holds 3 s after its work so the counts can
# be read while leakscope still has the programs.
if phase stats && [[ " ${active[*]} " == *" leakscope "* ]] && [[ " $STORMS " == *" alloc "* ]]; then
	echo "== per-program BPF time (alloc storm, 1 thread, bpf_stats_enabled=1)"
	rm -f "$RAW"/stats.*
	old_stats=$(sysctl -n kernel.bpf_stats_enabled)
	trap 'sysctl -qw kernel.bpf_stats_enabled="$old_stats"' EXIT
	sysctl -qw kernel.bpf_stats_enabled=1
	bin/leakscope run --progress never --format json -o "$RAW/stats.json" -- bin/bench/alloc_storm --threads 1 --hold 3000 >/dev/null 2>"$RAW/stats.err" &
	lpid=$!
	while kill -0 "$lpid" 2>/dev/null; do
		snap=""
		for fd in /proc/"$lpid"/fd/*; do
			[ "$(readlink "$fd" 2>/dev/null)" = "anon_inode:bpf-prog" ] || continue
			snap+="$(awk '/^prog_id:|^run_time_ns:|^run_cnt:/{printf "%s %s ", $1, $2}' /proc/"$lpid"/fdinfo/"${fd##*/}" 2>/dev/null || true)"$'\n'
		done
		# Keep the last sample taken while the target still held (its
		# summary line comes after the hold).
		if [ -n "$snap" ] && ! grep -q storm_ns "$RAW/stats.err"; then
			printf '%s' "$snap" >"$RAW/stats.progs"
			# Name the programs once, while their IDs are live.
			if [ ! -s "$RAW/stats.names" ] && command -v bpftool >/dev/null; then
				awk '{print $2}' "$RAW/stats.progs" | while read -r id; do
					bpftool prog show id "$id" 2>/dev/null | awk -v id="$id" 'NR==1{for(i=1;i<=NF;i++) if($i=="name") print id, $(i+1)}'
				done >"$RAW/stats.names"
			fi
		fi
		sleep 0.5
	done
	wait "$lpid" || true
	sysctl -qw kernel.bpf_stats_enabled="$old_stats"
	trap - EXIT
fi

# ---------------------------------------------------------------- program time
# The programs' own ns per run, 1 and 2 storm threads (bench/progtime.sh).
if phase progtime && [[ " ${active[*]} " == *" leakscope "* ]]; then
	echo "== BPF program time per run (bench/progtime.sh, ${PROGTIME_REPS:-3} repetitions)"
	REPS=${PROGTIME_REPS:-3} bash bench/progtime.sh ${PROGTIME_OLD:+"$PROGTIME_OLD"} bin/leakscope >"$RAW/progtime.txt" 2>&1 ||
		note "bench/progtime.sh failed (see $RAW/progtime.txt)"
	sed -n '/^# medians/,$p' "$RAW/progtime.txt"
fi

phase timed && echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/context.txt"

# ---------------------------------------------------------------- many stacks
# leakscope's own memory where it holds the most: 1M live allocations on
# 100k stacks, with and without its memory limit, alternated.
if phase stacks; then
	echo "== memory at 1M allocations on 100k stacks: bench/stacks.sh, $STACKS_REPS repetitions"
	for rep in $(seq 1 "$STACKS_REPS"); do
		for cfg in default nolimit; do
			flags=""
			[ "$cfg" = nolimit ] && flags="--memory-limit 0"
			LEAKSCOPE=bin/leakscope LSFLAGS="$flags" REPS=1 SAVE=1 RAW="$RAW/stacks-$cfg-$rep" \
				bash bench/stacks.sh >"$RAW/stacks.$cfg.$rep.txt" 2>&1 ||
				{ cat "$RAW/stacks.$cfg.$rep.txt" >&2; exit 2; }
			rm -f "$RAW/stacks-$cfg-$rep/c.capture" # 400 MB each
			echo "  $cfg rep $rep: $(grep -o 'peak hwm [0-9]* MiB' "$RAW/stacks.$cfg.$rep.txt")"
		done
	done
fi

# ---------------------------------------------------------------- JVM throughput
# examples/java/KafkaRecovery.java --throughput-ms: the broker's steady state
# (one gzip fetch, stream opened, read whole and closed, plus one plain
# recovery read per operation) for KAFKA_MS, rate measured inside the JVM
# (start-up excluded), bare vs leakscope run with the default JVM probe set
# (--malloc auto: off for a JVM) vs --malloc on vs the default set with
# --probes-only (the probes' own cost), alternating, REPS times;
# KAFKA_RECORDS sets the records per gzip batch (the example's 32, and a
# larger batch).
KAFKA_MS=${KAFKA_MS:-5000}
KAFKA_RECORDS=${KAFKA_RECORDS:-"32 512"}
if phase kafka; then
	if ! command -v javac >/dev/null || [ "$(id -u)" != 0 ]; then
		note "skip kafka: needs javac and root"
	else
		echo "== JVM throughput: KafkaRecovery --throughput-ms $KAFKA_MS, records $KAFKA_RECORDS"
		mkdir -p "$RAW/kafka-classes"
		javac -d "$RAW/kafka-classes" examples/java/KafkaRecovery.java
		kmodes=(bare default mallocon floor)
		for rep in $(seq 1 "$REPS"); do
			for rec in $KAFKA_RECORDS; do
				for i in 0 1 2 3; do
					mode=${kmodes[$(((i + rep - 1) % 4))]}
					base=$RAW/kafka.$rec.$mode.$rep
					jcmd=(java -XX:+PreserveFramePointer -cp "$RAW/kafka-classes" KafkaRecovery --throughput-ms "$KAFKA_MS" --batch-ms 0 --batch-records "$rec")
					case $mode in
					bare) cmd=("${jcmd[@]}") ;;
					default) cmd=(bin/leakscope run --progress never --format json -o "$base.json" -- "${jcmd[@]}") ;;
					mallocon) cmd=(bin/leakscope run --progress never --format json --malloc on -o "$base.json" -- "${jcmd[@]}") ;;
					floor) cmd=(bin/leakscope run --progress never --format json --probes-only -o "$base.json" -- "${jcmd[@]}") ;;
					esac
					cut -d' ' -f1 /proc/loadavg >"$base.load"
					"${cmd[@]}" >"$base.out" 2>"$base.err" || note "kafka $rec/$mode rep $rep failed (see $base.err)"
					echo "  kafka records=$rec $mode rep $rep: $(grep -o 'throughput [0-9.]* ops/s' "$base.err" || echo failed) (load $(cat "$base.load"))"
				done
			done
		done
	fi
fi

# ---------------------------------------------------------------- Go benchmarks
if phase go; then
	echo "== Go benchmarks"
	echo "loadavg_go=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW/context.txt"
	{
		go test -run '^$' -bench 'Rank|CaptureFile' -benchmem -benchtime 3x ./analyze/
		go test -run '^$' -bench 'Render' -benchmem -benchtime 3x ./report/
		go test -run '^$' -bench 'Symbolize' -benchmem -benchtime 3x ./probe/symbolize/
		go test -run '^$' -bench 'Snapshot' -benchmem -benchtime 5x ./probe/
	} 2>&1 | tee "$RAW/gobench.txt" | grep -E '^(Benchmark|ok|FAIL|---)' || true
fi

# ---------------------------------------------------------------- mappings
# What --maps costs: bench/maps.sh, its table appended to the results.
if phase redis; then
	if ! command -v redis-server >/dev/null || [ "$(id -u)" != 0 ]; then
		note "skip redis: needs redis-server (apt-get install redis-server redis-tools) and root"
	else
		echo "== redis: bench/redis.sh, ${REDIS_REPS:-$REPS} rounds of ${REDIS_REQUESTS:-200000} requests"
		SAMPLE_BYTES=$SAMPLE_BYTES bash bench/redis.sh "$RAW" "${REDIS_REPS:-$REPS}" || note "redis failed (exit $?)"
	fi
fi

if phase maps; then
	echo "== --maps: bench/maps.sh, ${MAPS_REPS:-$REPS} repetitions"
	LEAKSCOPE=bin/leakscope REPS=${MAPS_REPS:-$REPS} RAW="$RAW/maps" bash bench/maps.sh >"$RAW/maps.md"
fi

# ---------------------------------------------------------------- report
echo "== report"
python3 bench/report.py "$RAW" >"$OUT"
if [ -s "$RAW/maps.md" ]; then
	printf '\n## Mappings and threads (--maps)\n\nTarget CPU (user + system), mean of the repetitions; bare, `leakscope run` and `leakscope run --maps` alternated (bench/maps.sh).\n\n' >>"$OUT"
	cat "$RAW/maps.md" >>"$OUT"
fi
cp "$OUT" "$RAW/results.md"
echo
cat "$OUT"
echo
echo "== written to $OUT (raw: $RAW)"

#!/usr/bin/env bash
# bench/redis.sh - what leakscope costs a real server: Debian's redis-server
# (jemalloc) on a private unix socket, loaded by redis-benchmark, with
# leakscope attached in each mode in turn (make bench's "redis" phase; method
# in docs/performance.md).
#
# Usage: bench/redis.sh RAW [REPS]
#   RAW   directory for the raw results (redis.*)
#   REPS  rounds; each round runs every mode once, rotated (default 3)
# Environment:
#   REDIS_REQUESTS=200000  requests per benchmark run (SET and GET, 50 clients)
#   SAMPLE_BYTES=512KiB    --sample-bytes of the sampled modes
#
# Each run records the server's CPU time (utime + stime from /proc/PID/stat)
# over the benchmark and redis-benchmark's requests per second. The server's
# allocator calls per request come from a separate, untimed run under
# bpftrace (uprobe counts on the allocator's functions), when bpftrace is
# installed: µs per call = (mode CPU - bare CPU) / calls.
# Prints one line per run: redis MODE REP cpu_ms=... rps=... load=...
set -euo pipefail
cd "$(dirname "$0")/.."

RAW=${1:?usage: bench/redis.sh RAW [REPS]}
REPS=${2:-3}
N=${REDIS_REQUESTS:-200000}
SAMPLE_BYTES=${SAMPLE_BYTES:-512KiB}
BIN=bin/leakscope

for c in redis-server redis-benchmark redis-cli; do
	command -v "$c" >/dev/null || { echo "bench/redis.sh: $c not found (apt-get install redis-server redis-tools)" >&2; exit 3; }
done
mkdir -p "$RAW"

# A directory only root can enter: the socket is not reachable by other users.
dir=$(mktemp -d)
chmod 700 "$dir"
sock=$dir/redis.sock
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' --appendonly no \
	--dir "$dir" --daemonize no >"$RAW/redis-server.log" 2>&1 &
rpid=$!
lpid=
cleanup() {
	[ -n "$lpid" ] && kill -INT "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null
	kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
	redis-cli -s "$sock" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -s "$sock" ping >/dev/null || { echo "bench/redis.sh: redis-server did not start (see $RAW/redis-server.log)" >&2; exit 2; }
allocator=$(redis-cli -s "$sock" info memory | tr -d '\r' | sed -n 's/^mem_allocator://p')
echo "redis_allocator=$allocator" >"$RAW/redis.context"

ticks() { awk '{print $14 + $15}' "/proc/$rpid/stat"; }
hz=$(getconf CLK_TCK)

bench() { # bench OUT: one redis-benchmark run; prints its requests per second
	redis-benchmark -s "$sock" -n "$N" -c 50 -r 100000 -t set,get -q --csv >"$1" 2>&1
	awk -F'"' 'NR > 1 && $4 != "" {s += $4; n++} END {printf "%.0f\n", n ? s / n : 0}' "$1"
}

attach() { # attach MODE BASE: starts leakscope on the server, waits until it traces
	local args=()
	case $1 in
	exact) ;;
	sampled) args=(--sample-bytes "$SAMPLE_BYTES") ;;
	floor) args=(--probes-only) ;;
	floorsampled) args=(--probes-only --sample-bytes "$SAMPLE_BYTES") ;;
	esac
	"$BIN" attach --pid "$rpid" --progress always --format json -o "$2.json" "${args[@]}" 2>"$2.err" &
	lpid=$!
	for _ in $(seq 1 300); do
		grep -q "leakscope: pid $rpid" "$2.err" 2>/dev/null && return 0
		kill -0 "$lpid" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench/redis.sh: leakscope $1 did not attach (see $2.err)" >&2
	return 1
}

# Warm the server (its hash tables, jemalloc's arenas) before the first
# timed run.
bench "$RAW/redis.warmup.csv" >/dev/null

modes=(bare exact sampled floor floorsampled)
for rep in $(seq 1 "$REPS"); do
	for i in "${!modes[@]}"; do
		mode=${modes[$(((i + rep - 1) % ${#modes[@]}))]}
		base=$RAW/redis.$mode.$rep
		[ "$mode" = bare ] || attach "$mode" "$base"
		load=$(cut -d' ' -f1 /proc/loadavg)
		t0=$(ticks)
		rps=$(bench "$base.csv")
		t1=$(ticks)
		if [ -n "$lpid" ]; then
			kill -INT "$lpid"
			wait "$lpid" || echo "bench/redis.sh: leakscope $mode exited $? (see $base.err)" >&2
			lpid=
		fi
		cpu_ms=$(((t1 - t0) * 1000 / hz))
		echo "redis $mode $rep cpu_ms=$cpu_ms rps=$rps load=$load" | tee -a "$RAW/redis.runs"
	done
done

# Allocator calls per request, counted by bpftrace on the allocator the
# server uses (the object its malloc resolves to), over one more run.
if command -v bpftrace >/dev/null; then
	lib=$(awk '$6 ~ /jemalloc|libc\.so/ {print $6}' "/proc/$rpid/maps" | sort -u | grep jemalloc || awk '$6 ~ /libc\.so/ {print $6}' "/proc/$rpid/maps" | head -1)
	probes=""
	for fn in malloc calloc realloc free posix_memalign aligned_alloc memalign; do
		probes+="uprobe:$lib:$fn /pid == $rpid/ { @calls = count(); } "
	done
	bpftrace -e "$probes" >"$RAW/redis.calls.out" 2>&1 &
	bpid=$!
	sleep 5 # bpftrace attaches
	bench "$RAW/redis.count.csv" >/dev/null
	kill -INT "$bpid"
	wait "$bpid" || true
	calls=$(sed -n 's/^@calls: //p' "$RAW/redis.calls.out")
	requests=$(awk -F'"' 'NR > 1 && $2 != "" {n++} END {print n}' "$RAW/redis.count.csv")
	echo "redis_allocator_object=$lib" >>"$RAW/redis.context"
	echo "redis_calls=$calls redis_requests=$((requests * N))" | tee -a "$RAW/redis.context"
fi

#!/usr/bin/env bash
# bench/soak.sh - leakscope's soak test (make soak; not part of make test or
# CI). Results and method in docs/reliability.md.
#
# It builds leakscope and examples/c/churn.c (with frame pointers), then runs
#
#   leakscope run --interval 1s --top 100 --save soak.capture --format json \
#     -o soak.json -- churn --forever --threads 4 --iterations 50000 \
#     --interval 1000 --duration SOAK_SECONDS*1000 --hold 600000
#
# for SOAK_SECONDS, sampling leakscope's VmRSS (and CPU time) every 10 s into
# rss.csv. churn's --duration ends its rounds at a round boundary; once its
# summary line is on stderr (the leaks stay held for --hold), the script sends
# SIGINT to the process group, as Ctrl-C at a terminal would, and checks:
#
#   * leakscope exits 0 and writes the JSON report and the capture;
#   * the counts are exact: churn's summary gives the completed thread-rounds
#     R, and the report's leak_in_worker rows must hold 25R blocks, 8000R
#     bytes, leak_grown_buffer's R blocks, 5000R bytes (summed over rows: a
#     site is a call stack); the capture re-rendered by leakscope report says
#     the same;
#   * every allocation was seen: the capture's per-site totals add up to
#     churn's own allocating calls plus pthread_create's T DTV blocks;
#   * nothing was lost: the report's "lost" counters are 0, except
#     unknown_frees, which may be up to 449 per thread: when a thread exits,
#     glibc's tcache_thread_shutdown hands the blocks in its thread cache
#     (at most 7 in each of 64 bins, all already freed by the program) and the
#     cache itself (allocated inside malloc) to free, which leakscope never saw
#     allocated. It does not grow with the duration: churn's threads exit once;
#   * leakscope's RSS is stable: the largest sample of the second half is at
#     most RSS_SLACK_PCT (10) percent above the largest of the first half.
# The checks are bench/soak_check.py, which can be run again on a run's
# directory.
#
# Why not interrupt churn mid-round: SIGINT stops leakscope's tracing at once,
# while churn's threads finish the rounds they are in, so the traced count
# would not be a whole number of rounds (TestRunCtrlCWritesReport checks only
# that the leak is there). Ending the work first makes the count exact and
# still exercises the Ctrl-C path.
#
# Environment:
#   SOAK_SECONDS=600     how long churn starts new rounds
#   SOAK_THREADS=4       churn --threads
#   SOAK_ITERATIONS=50000  churn --iterations (per thread and round)
#   SOAK_INTERVAL_MS=1000  churn --interval (sleep between rounds)
#   RSS_SLACK_PCT=10
#   SOAK_DIR=bin/soak/run-<stamp>   where everything is written
# Exit status: 0 all checks passed, 1 a check failed, 2 could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_THREADS=${SOAK_THREADS:-4}
SOAK_ITERATIONS=${SOAK_ITERATIONS:-50000}
SOAK_INTERVAL_MS=${SOAK_INTERVAL_MS:-1000}
RSS_SLACK_PCT=${RSS_SLACK_PCT:-10}
DIR=${SOAK_DIR:-bin/soak/run-$(date -u +%Y%m%dT%H%M%SZ)}
GO=${GO:-go}

if [ "$(id -u)" != 0 ]; then
	echo "soak: needs root (leakscope loads BPF programs)" >&2
	exit 2
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
echo "== soak: ${SOAK_SECONDS}s, results in $DIR"

CGO_ENABLED=0 $GO build -o "$DIR/leakscope" ./cmd/leakscope
gcc -O2 -g -Wall -Wextra -pthread -fno-omit-frame-pointer -o "$DIR/churn" examples/c/churn.c

# ------------------------------------------------------------------ run
# Job control: the background job gets a process group of its own, whose id
# is leakscope's pid, so the SIGINT below reaches leakscope and churn only.
set -m
"$DIR/leakscope" run --interval 1s --top 100 --save "$DIR/soak.capture" \
	--format json -o "$DIR/soak.json" -- \
	"$DIR/churn" --forever --threads "$SOAK_THREADS" --iterations "$SOAK_ITERATIONS" \
	--interval "$SOAK_INTERVAL_MS" --duration $((SOAK_SECONDS * 1000)) --hold 600000 \
	2>"$DIR/stderr.log" </dev/null &
LS=$!
set +m
start=$(date +%s)
{
	echo "# leakscope $DIR/leakscope, pid $LS, started $(date -u +%FT%TZ)"
	echo "# $(nproc) CPUs, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$DIR/notes.txt"

clk_tck=$(getconf CLK_TCK)
echo "elapsed_s,rss_kib,cpu_s" >"$DIR/rss.csv"
sample() { # one row of rss.csv; quiet if leakscope is gone
	local rss stat
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$LS/status" 2>/dev/null) || return 0
	stat=$(cat "/proc/$LS/stat" 2>/dev/null) || return 0
	[ -n "$rss" ] || return 0
	# utime and stime are fields 14 and 15; comm (field 2) has no spaces here.
	set -- $stat
	echo "$(($(date +%s) - start)),$rss,$(awk -v t="$((${14} + ${15}))" -v h="$clk_tck" 'BEGIN {printf "%.2f", t / h}')" >>"$DIR/rss.csv"
}

fail=0
summary=""
limit=$((SOAK_SECONDS + 300))
next=0
while :; do
	now=$(($(date +%s) - start))
	if [ "$now" -ge "$next" ]; then
		sample
		next=$((next + 10))
	fi
	if ! kill -0 "$LS" 2>/dev/null; then
		echo "soak: leakscope exited before churn's summary line" >&2
		fail=1
		break
	fi
	summary=$(grep -m1 '^churn: leaked' "$DIR/stderr.log" || true)
	[ -n "$summary" ] && break
	if [ "$now" -ge "$limit" ]; then
		echo "soak: no summary line from churn after ${now}s" >&2
		fail=1
		break
	fi
	sleep 1
done
sample # the last sample: the work is done, tracing still runs

# Ctrl-C: the whole process group.
kill -INT -- "-$LS" 2>/dev/null || true
rc=0
for _ in $(seq 120); do
	kill -0 "$LS" 2>/dev/null || break
	sleep 1
done
if kill -0 "$LS" 2>/dev/null; then
	echo "soak: leakscope still running 120s after SIGINT; killing it" >&2
	kill -KILL -- "-$LS" 2>/dev/null || true
	fail=1
fi
wait "$LS" || rc=$?
end=$(($(date +%s) - start))
echo "# leakscope exit status $rc after ${end}s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$DIR/notes.txt"
[ "$rc" = 0 ] || { echo "soak: leakscope exited $rc" >&2; fail=1; }

# The capture, re-rendered without the target.
if [ -s "$DIR/soak.capture" ]; then
	"$DIR/leakscope" report --top 100 --format json -o "$DIR/capture.json" "$DIR/soak.capture" ||
		{ echo "soak: leakscope report of the capture failed" >&2; fail=1; }
fi

# ------------------------------------------------------------------ checks
# bench/soak_check.py reads everything from $DIR, so it can be run again on a
# finished run.
python3 bench/soak_check.py --slack-pct "$RSS_SLACK_PCT" --threads "$SOAK_THREADS" "$DIR" | tee "$DIR/checks.txt" || fail=1

{
	echo "== stderr (tail)"
	tail -n 5 "$DIR/stderr.log"
} | sed 's/^/  /'
if [ "$fail" = 0 ]; then
	echo "== soak PASSED ($DIR)"
else
	echo "== soak FAILED ($DIR)"
fi
exit "$fail"

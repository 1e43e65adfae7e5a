#!/usr/bin/env bash
# bench/soak-agent.sh - leakscope agent's soak (make soak-agent; not part of
# make test or CI). Results and method in docs/agent.md#soak.
#
# It builds leakscope, examples/c/leaky.c and examples/c/churn.c (with frame
# pointers) and starts
#
#   leakscope agent --select comm=soakleak --select comm=soakchurn \
#     --listen 127.0.0.1:PORT --log-format json
#
# with the agent's defaults otherwise (a snapshot every 10s, malloc sampled
# one per 512 KiB, zlib), then for SOAK_SECONDS:
#
#   * keeps a leaky --forever running as "soakleak", killed and started
#     again every RESTART_SECONDS (a service restarted: the agent must
#     detach and attach to the replacement);
#   * keeps a churn --forever (4 threads of allocator churn) running as
#     "soakchurn";
#   * scrapes /metrics and /debug/pprof/leaks every 10 s, as Prometheus and
#     Parca would, and samples the agent's VmRSS and CPU time into rss.csv.
#
# Then it checks: the agent still runs and answers; every soakleak started
# was attached to (leakscope_agent_attaches_total) and every one killed was
# detached from; /metrics names leak_request_buffer; and the agent's RSS is
# flat: the largest sample of the second half is at most RSS_SLACK_PCT (10)
# percent above the largest of the first half.
#
# The overhead part runs churn --threads 1 --forever --duration
# OVERHEAD_SECONDS*1000 once without the agent and once under it, and
# compares the thread-rounds each completed (churn's summary line).
#
# Environment: SOAK_SECONDS=600 RESTART_SECONDS=60 OVERHEAD_SECONDS=20
#   RSS_SLACK_PCT=10 SOAK_DIR=bin/soak-agent/run-<stamp>
# Exit status: 0 all checks passed, 1 a check failed, 2 could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_SECONDS=${SOAK_SECONDS:-600}
RESTART_SECONDS=${RESTART_SECONDS:-60}
OVERHEAD_SECONDS=${OVERHEAD_SECONDS:-20}
RSS_SLACK_PCT=${RSS_SLACK_PCT:-10}
DIR=${SOAK_DIR:-bin/soak-agent/run-$(date -u +%Y%m%dT%H%M%SZ)}
GO=${GO:-go}
PORT=${PORT:-19464}

if [ "$(id -u)" != 0 ]; then
	echo "soak-agent: needs root (BPF)" >&2
	exit 2
fi
mkdir -p "$DIR"
CGO_ENABLED=0 $GO build -o "$DIR/leakscope" ./cmd/leakscope
gcc -O2 -g -pthread -fno-omit-frame-pointer -o "$DIR/soakleak" examples/c/leaky.c
gcc -O2 -g -pthread -fno-omit-frame-pointer -o "$DIR/soakchurn" examples/c/churn.c
cp "$DIR/soakchurn" "$DIR/ovhchurn"

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "${AGENT:-}" ] && kill "$AGENT" 2>/dev/null || true
	[ -n "${LEAK:-}" ] && kill "$LEAK" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT

rounds() { # churn's thread-rounds from its summary line
	sed -n 's/.*thread-rounds \([0-9]*\).*/\1/p' "$1" | tail -1
}

# --- overhead: churn alone, then under the agent -------------------------
"$DIR/ovhchurn" --threads 1 --forever --interval 0 --duration $((OVERHEAD_SECONDS * 1000)) 2>"$DIR/overhead-alone.txt" >/dev/null
"$DIR/leakscope" agent --select comm=ovhchurn --listen "127.0.0.1:$PORT" --log-format json 2>"$DIR/overhead-agent.log" &
AGENT=$!
sleep 1
"$DIR/ovhchurn" --threads 1 --forever --interval 0 --pause-before 3000 --duration $((OVERHEAD_SECONDS * 1000)) 2>"$DIR/overhead-traced.txt" >/dev/null
kill -TERM "$AGENT"; wait "$AGENT" || true; AGENT=
alone=$(rounds "$DIR/overhead-alone.txt"); traced=$(rounds "$DIR/overhead-traced.txt")
echo "overhead: churn --threads 1 completed $alone thread-rounds alone, $traced under the agent in ${OVERHEAD_SECONDS}s" | tee "$DIR/overhead.txt"

# --- soak -----------------------------------------------------------------
"$DIR/leakscope" agent --select comm=soakleak --select comm=soakchurn --listen "127.0.0.1:$PORT" --log-format json 2>"$DIR/agent.log" &
AGENT=$!
"$DIR/soakchurn" --threads 4 --forever --interval 1000 >/dev/null 2>&1 &
pids+=($!)
starts=0
start_leak() { "$DIR/soakleak" --forever >/dev/null 2>&1 & LEAK=$!; starts=$((starts + 1)); }
start_leak
echo "t_s,rss_kib,cpu_ticks,targets" >"$DIR/rss.csv"
t0=$(date +%s); last_restart=$t0
tck=$(getconf CLK_TCK)
while :; do
	now=$(date +%s); el=$((now - t0))
	[ "$el" -ge "$SOAK_SECONDS" ] && break
	if [ $((now - last_restart)) -ge "$RESTART_SECONDS" ]; then
		kill "$LEAK"; wait "$LEAK" 2>/dev/null || true
		start_leak; last_restart=$now
	fi
	curl -sf "http://127.0.0.1:$PORT/metrics" >"$DIR/metrics.txt" || { echo "soak-agent: /metrics failed at ${el}s" >&2; exit 1; }
	curl -sf -o "$DIR/leaks.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/leaks" || { echo "soak-agent: /debug/pprof/leaks failed at ${el}s" >&2; exit 1; }
	rss=$(awk '/^VmRSS/ {print $2}' /proc/$AGENT/status)
	cpu=$(awk '{print $14 + $15}' /proc/$AGENT/stat)
	targets=$(awk '/^leakscope_agent_targets / {print $2}' "$DIR/metrics.txt")
	echo "$el,$rss,$cpu,$targets" >>"$DIR/rss.csv"
	sleep 10
done
sleep 12 # one more snapshot, then read the counters
curl -sf "http://127.0.0.1:$PORT/metrics" >"$DIR/metrics.txt"
attaches=$(awk '/^leakscope_agent_attaches_total / {print $2}' "$DIR/metrics.txt")
detaches=$(awk '/^leakscope_agent_detaches_total / {print $2}' "$DIR/metrics.txt")
fail=0
# soakchurn once, soakleak $starts times; all but the running soakleak detached.
if [ "$attaches" != $((starts + 1)) ] || [ "$detaches" != $((starts - 1)) ]; then
	echo "soak-agent: FAIL: $starts soakleak starts, agent attached $attaches times (want $((starts + 1))), detached $detaches (want $((starts - 1)))"
	fail=1
fi
grep -q 'culprit="leak_request_buffer"' "$DIR/metrics.txt" || { echo "soak-agent: FAIL: /metrics does not name leak_request_buffer"; fail=1; }
awk -F, -v slack="$RSS_SLACK_PCT" -v tck="$tck" 'NR > 1 { t[NR] = $1; r[NR] = $2; c[NR] = $3; n = NR }
END {
	half = int((n + 1) / 2); m1 = 0; m2 = 0
	for (i = 2; i <= n; i++) { if (i <= half) { if (r[i] > m1) m1 = r[i] } else { if (r[i] > m2) m2 = r[i] } }
	cpu = (c[n] - c[2]) / tck; span = t[n] - t[2]; pct = 0
	if (span > 0) pct = 100 * cpu / span
	printf "agent RSS: max %d KiB in the first half, %d KiB in the second; CPU %.1fs over %ds (%.2f%% of a core)\n", m1, m2, cpu, span, pct
	if (m2 > m1 * (1 + slack / 100)) { print "soak-agent: FAIL: RSS grew"; exit 1 }
}' "$DIR/rss.csv" | tee "$DIR/summary.txt" || fail=1
echo "soak-agent: $starts soakleak starts, $attaches attaches, $detaches detaches over ${SOAK_SECONDS}s; results in $DIR" | tee -a "$DIR/summary.txt"
exit $fail

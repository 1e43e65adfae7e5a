#!/usr/bin/env bash
# bench/soak-agent.sh - leakscope agent's soak (make soak-agent; not part of
# make test or CI). Results and method in docs/agent.md#soak.
#
# It builds leakscope and examples/c/churn.c (with frame pointers) once into
# SOAK_DIR, so rebuilding the tree meanwhile does not change a running soak,
# and starts
#
#   leakscope agent --select comm=soakchurn --max-targets TARGETS+4 \
#     --sample-bytes off --listen 127.0.0.1:PORT --log-format json
#
# with the agent's defaults otherwise (a snapshot every 10s, the kernel
# tables a quarter of attach's). --sample-bytes off makes every count exact,
# so the agent's numbers can be compared with each target's own; sampling's
# estimate is tested on its own (TestSampledReallocEstimate).
#
# For SOAK_SECONDS it keeps TARGETS (20) slots of "soakchurn" (churn.c
# --forever --threads 1 --iterations ITERATIONS: a round of allocator churn a
# second, leaking 25 x 320 B in leak_in_worker and one realloc-grown 5000 B
# block in leak_grown_buffer per round). Each slot's process lives
# LIFE_SECONDS (300), is stopped (SIGTERM, then SIGKILL 2 s later, or SIGKILL
# at once, alternately: a service stopped and one that crashed), and comes
# back GAP_SECONDS (5) later as a new process; slot i's first stop is at
# (i+1) x LIFE_SECONDS / TARGETS, so the stops are staggered, one every
# LIFE_SECONDS / TARGETS seconds. A target waits (--wait-file) until the
# agent's log says it is attached before it starts its work, so everything
# it leaks is the agent's to see; its --duration ends its work at the end of
# the soak, and --hold keeps it (and its leaks) alive for the checks.
#
# Every 10 s it scrapes /metrics and /debug/pprof/leaks, as Prometheus and
# Parca would, and records the agent's VmRSS and CPU time, the targets it
# reports, and the pid of every uprobe link the agent holds (from
# /proc/AGENT/fdinfo) into rss.csv and links.log.
#
# Then it checks:
#   * attached to every start: leakscope_agent_attaches_total equals the
#     starts, detaches equals the starts less the targets alive; no attach
#     failure;
#   * no target left attached after it exited: no uprobe link of the agent
#     names a pid that was gone in two samples in a row (10 s apart), and at
#     the end the pids of the agent's links, and of leakscope_target_info
#     less the exited ones it still serves (--keep-exited,
#     leakscope_target_exited_timestamp_seconds), are exactly the live
#     targets'; once the agent exits (SIGTERM), none of the
#     BPF links, maps and programs it held is left in the kernel (bpftool);
#   * counts exact for the targets alive at the end: each target's summary
#     line (its own count of what it leaked) against the agent's /metrics:
#     leakscope_leak_outstanding_{count,bytes} of culprits leak_in_worker and
#     leak_grown_buffer, and leakscope_outstanding_count of kind malloc;
#   * RSS flat: after WARMUP_SECONDS (SOAK_SECONDS / 6), the largest sample of
#     the second half is at most RSS_SLACK_PCT (10) percent above the largest
#     of the first half.
#
# The overhead part first runs churn --threads 1 --forever --interval 0
# --duration OVERHEAD_SECONDS*1000 once without the agent and once under it
# (the agent's defaults: malloc sampled), and compares the thread-rounds each
# completed (churn's summary line); OVERHEAD_SECONDS=0 skips it.
#
# Environment: SOAK_SECONDS=600 TARGETS=20 LIFE_SECONDS=300 GAP_SECONDS=5
#   ITERATIONS=2000 WARMUP_SECONDS=SOAK_SECONDS/6 OVERHEAD_SECONDS=20
#   RSS_SLACK_PCT=10 PORT=19464 SOAK_DIR=bin/soak-agent/run-<stamp>
# Exit status: 0 all checks passed, 1 a check failed, 2 could not run.
set -euo pipefail
# The repository's top, also from a copy of this script in it (a copy keeps
# a running soak's script from changing under it).
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

SOAK_SECONDS=${SOAK_SECONDS:-600}
TARGETS=${TARGETS:-20}
LIFE_SECONDS=${LIFE_SECONDS:-300}
GAP_SECONDS=${GAP_SECONDS:-5}
ITERATIONS=${ITERATIONS:-2000}
WARMUP_SECONDS=${WARMUP_SECONDS:-$((SOAK_SECONDS / 6))}
OVERHEAD_SECONDS=${OVERHEAD_SECONDS:-20}
RSS_SLACK_PCT=${RSS_SLACK_PCT:-10}
DIR=${SOAK_DIR:-bin/soak-agent/run-$(date -u +%Y%m%dT%H%M%SZ)}
GO=${GO:-go}
PORT=${PORT:-19464}

# check_counts DIR: each live target's own count (its summary line, in
# DIR/t) against the agent's last /metrics (DIR/metrics-end.txt) and
# /debug/pprof/leaks (DIR/leaks-end.pb.gz, summed by pid and culprit with go
# tool pprof -raw), for the pids in DIR/alive-end.txt; writes counts.txt and
# the number exact in exact.txt. bench/soak-agent.sh --check DIR runs it
# again on a finished run.
check_counts() {
	local dir=$1 p f lb lB gb gB r ac aB gc gA tot pc pB qc qB exact=0 inexact=0
	$GO tool pprof -raw "$dir/leaks-end.pb.gz" 2>/dev/null | awk '
		/^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+:/ { io = $3; is = $4; want = 1; next }
		want && /pid:\[/ { want = 0
			c = $0; sub(/.*culprit:\[/, "", c); sub(/\].*/, "", c)
			p = $0; sub(/.*pid:\[/, "", p); sub(/\].*/, "", p)
			n[p " " c] += io; b[p " " c] += is }
		END { for (k in n) printf "%s %.0f %.0f\n", k, n[k], b[k] }' >"$dir/pprof-sums.txt" || true
	metric() { # name pid [culprit]: the sample's value as an integer, or "none"
		awk -v n="$1" -v p="pid=\"$2\"" -v c="${3:+culprit=\"$3\"}" '
			index($0, n "{") == 1 && index($0, p) && (c == "" || index($0, c)) && (c != "" || index($0, "kind=\"malloc\"")) { v = $NF; f = 1 }
			END { if (f) printf "%.0f\n", v; else print "none" }' "$dir/metrics-end.txt"
	}
	pprof() { # pid culprit: "objects bytes" from the profile, or "none none"
		awk -v k="$1 $2" '$1 " " $2 == k { print $3, $4; f = 1 } END { if (!f) print "none none" }' "$dir/pprof-sums.txt"
	}
	printf '%-7s %-6s %-17s %-17s %-17s %-13s %-13s %-13s %s\n' pid rounds "leak_in_worker" "/metrics" "/debug/pprof" "grown_buffer" "/metrics" "/debug/pprof" "malloc outstanding" >"$dir/counts.txt"
	while read -r p; do
		[ -z "$p" ] && continue
		f=$(grep -l "; pid $p;" "$dir"/t/*.txt 2>/dev/null | head -1 || true)
		lb= lB= gb= gB= r=
		[ -n "$f" ] && read -r lb lB gb gB r < <(sed -n 's/^churn: leaked \([0-9]*\) blocks, \([0-9]*\) bytes in leak_in_worker; leaked \([0-9]*\) blocks, \([0-9]*\) bytes in leak_grown_buffer.*thread-rounds \([0-9]*\).*/\1 \2 \3 \4 \5/p' "$f") || true
		ac=$(metric leakscope_leak_outstanding_count "$p" leak_in_worker); aB=$(metric leakscope_leak_outstanding_bytes "$p" leak_in_worker)
		gc=$(metric leakscope_leak_outstanding_count "$p" leak_grown_buffer); gA=$(metric leakscope_leak_outstanding_bytes "$p" leak_grown_buffer)
		tot=$(metric leakscope_outstanding_count "$p")
		read -r pc pB < <(pprof "$p" leak_in_worker) || true
		read -r qc qB < <(pprof "$p" leak_grown_buffer) || true
		printf '%-7s %-6s %-17s %-17s %-17s %-13s %-13s %-13s %s\n' "$p" "${r:-?}" "${lb:-?}/${lB:-?}" "$ac/$aB" "$pc/$pB" "${gb:-?}/${gB:-?}" "$gc/$gA" "$qc/$qB" "$tot of $(( ${lb:-0} + ${gb:-0} ))" >>"$dir/counts.txt"
		if [ -n "$lb" ] && [ "$ac/$aB/$gc/$gA" = "$lb/$lB/$gb/$gB" ] && [ "$pc/$pB/$qc/$qB" = "$lb/$lB/$gb/$gB" ] && [ "$tot" = $((lb + gb)) ]; then
			exact=$((exact + 1))
		else
			inexact=$((inexact + 1))
		fi
	done <"$dir/alive-end.txt"
	echo "$exact" >"$dir/exact.txt"
	cat "$dir/counts.txt"
	echo "counts exact (the target's own, /metrics and /debug/pprof/leaks) for $exact of $((exact + inexact)) live targets" | tee -a "$dir/summary.txt"
	[ "$inexact" = 0 ] || { echo "soak-agent: FAIL: $inexact live targets' counts differ from their own"; return 1; }
}
if [ "${1:-}" = --check ]; then
	check_counts "$2"
	exit
fi

if [ "$(id -u)" != 0 ]; then
	echo "soak-agent: needs root (BPF)" >&2
	exit 2
fi
command -v bpftool >/dev/null || { echo "soak-agent: needs bpftool (apt-get install bpftool)" >&2; exit 2; }
mkdir -p "$DIR/t"
CGO_ENABLED=0 $GO build -o "$DIR/leakscope" ./cmd/leakscope
gcc -O2 -g -pthread -fno-omit-frame-pointer -o "$DIR/soakchurn" examples/c/churn.c
cp "$DIR/soakchurn" "$DIR/ovhchurn"
{
	echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/soak-agent.sh' || echo ' (modified)')"
	echo "started $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "SOAK_SECONDS=$SOAK_SECONDS TARGETS=$TARGETS LIFE_SECONDS=$LIFE_SECONDS GAP_SECONDS=$GAP_SECONDS ITERATIONS=$ITERATIONS WARMUP_SECONDS=$WARMUP_SECONDS"
	echo "$(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$DIR/run.txt"

declare -a spid sgen sstate sdue srel skill
AGENT= SAMPLER=
cleanup() {
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
	for i in "${!spid[@]}"; do [ -n "${spid[$i]}" ] && kill -KILL "${spid[$i]}" 2>/dev/null || true; done
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT

rounds() { # churn's thread-rounds from its summary line
	sed -n 's/.*thread-rounds \([0-9]*\).*/\1/p' "$1" | tail -1
}

# --- overhead: churn alone, then under the agent -------------------------
if [ "$OVERHEAD_SECONDS" -gt 0 ]; then
	"$DIR/ovhchurn" --threads 1 --forever --interval 0 --duration $((OVERHEAD_SECONDS * 1000)) 2>"$DIR/overhead-alone.txt" >/dev/null
	"$DIR/leakscope" agent --select comm=ovhchurn --listen "127.0.0.1:$PORT" --log-format json 2>"$DIR/overhead-agent.log" &
	AGENT=$!
	sleep 1
	"$DIR/ovhchurn" --threads 1 --forever --interval 0 --pause-before 3000 --duration $((OVERHEAD_SECONDS * 1000)) 2>"$DIR/overhead-traced.txt" >/dev/null
	kill -TERM "$AGENT"; wait "$AGENT" || true; AGENT=
	alone=$(rounds "$DIR/overhead-alone.txt"); traced=$(rounds "$DIR/overhead-traced.txt")
	echo "overhead: churn --threads 1 completed $alone thread-rounds alone, $traced under the agent in ${OVERHEAD_SECONDS}s" | tee "$DIR/overhead.txt"
fi

# --- soak -----------------------------------------------------------------
"$DIR/leakscope" agent --select comm=soakchurn --max-targets $((TARGETS + 4)) --sample-bytes off \
	--listen "127.0.0.1:$PORT" --log-format json 2>"$DIR/agent.log" &
AGENT=$!
t0=$(date +%s); t_end=$((t0 + SOAK_SECONDS))
starts=0 stops=0 late=0

# slot states: run (working or waiting for its attach), term (SIGTERM sent,
# SIGKILL due at sdue), gap (empty until sdue)
start_slot() { # slot
	local i=$1 now; now=$(date +%s)
	sgen[$i]=$((${sgen[$i]:--1} + 1))
	local f="$DIR/t/$i.${sgen[$i]}"
	"$DIR/soakchurn" --threads 1 --iterations "$ITERATIONS" --forever --interval 1000 \
		--wait-file "$f.start" --duration $(((t_end - now) * 1000)) --hold 1800000 >/dev/null 2>"$f.txt" &
	spid[$i]=$!; sstate[$i]=run; srel[$i]=0; skill[$i]=$now
	starts=$((starts + 1))
	echo "$now start slot $i gen ${sgen[$i]} pid ${spid[$i]}" >>"$DIR/events.log"
}
for ((i = 0; i < TARGETS; i++)); do
	start_slot "$i"
	sdue[$i]=$((t0 + (i + 1) * LIFE_SECONDS / TARGETS))
done

agent_links() { # the pids of the agent's uprobe links, one a line
	# cat, not awk on the files: mawk stops at a file that vanished (an
	# fd closed meanwhile). Every fdinfo starts with pos:.
	cat /proc/"$AGENT"/fdinfo/* 2>/dev/null |
		awk '/^pos:/ { t = "" } /^link_type:/ { t = $2 } /^pid:/ { if (t ~ /uprobe_multi/) print $2 }' | sort -u || true
}
agent_bpf_ids() { # link, map and prog ids the agent holds: "link 89" ...
	cat /proc/"$AGENT"/fdinfo/* 2>/dev/null |
		awk '/^link_id:/ { print "link", $2 } /^map_id:/ { print "map", $2 } /^prog_id:/ { print "prog", $2 }' | sort -u || true
}

# The sampler: every 10 s, scrape /metrics and /debug/pprof/leaks as
# Prometheus and Parca would, and record the agent's RSS and CPU, the
# targets it reports and the pids of its uprobe links; a link whose process
# was gone in two samples in a row is stale (stale.log).
sampler() {
	set +e # a failed sample is recorded, not the end of the sampler
	declare -A prev_dead dead
	local now el rss cpu targets links alive p
	while :; do
		now=$(date +%s); el=$((now - t0))
		curl -sf -m 30 "http://127.0.0.1:$PORT/metrics" >"$DIR/metrics.tmp" && mv "$DIR/metrics.tmp" "$DIR/metrics.txt" ||
			echo "$el /metrics failed" >>"$DIR/scrape-errors.log"
		curl -sf -m 30 -o "$DIR/leaks.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/leaks" ||
			echo "$el /debug/pprof/leaks failed" >>"$DIR/scrape-errors.log"
		rss=$(awk '/^VmRSS/ {print $2}' /proc/$AGENT/status 2>/dev/null) || return 0
		cpu=$(awk '{print $14 + $15}' /proc/$AGENT/stat 2>/dev/null) || return 0
		targets=$(awk '/^leakscope_agent_targets / {print $2}' "$DIR/metrics.txt")
		alive=$(pgrep -xc soakchurn || true)
		links=$(agent_links | tr '\n' ' ')
		dead=()
		for p in $links; do
			if [ ! -e "/proc/$p" ] || [ "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" = Z ]; then
				dead[$p]=1
				[ -n "${prev_dead[$p]:-}" ] && echo "$el the agent still holds a uprobe link of pid $p, gone for 10 s" >>"$DIR/stale.log"
			fi
		done
		prev_dead=(); for p in "${!dead[@]}"; do prev_dead[$p]=1; done
		echo "$el $links" >>"$DIR/links.log"
		echo "$el,$rss,$cpu,$targets,$alive,$(echo $links | wc -w)" >>"$DIR/rss.csv"
		sleep $((now + 10 - $(date +%s) > 0 ? now + 10 - $(date +%s) : 0))
	done
}

echo "t_s,rss_kib,cpu_ticks,targets,alive,links" >"$DIR/rss.csv"
: >"$DIR/links.log"; : >"$DIR/stale.log"; : >"$DIR/scrape-errors.log"
sampler &
SAMPLER=$!
attach_missed=0
while :; do
	now=$(date +%s)
	[ "$now" -ge "$t_end" ] && break
	for ((i = 0; i < TARGETS; i++)); do
		case ${sstate[$i]} in
		run)
			if [ "${srel[$i]}" = 0 ]; then
				if grep -q "\"msg\":\"attached\",\"pid\":${spid[$i]}," "$DIR/agent.log"; then
					touch "$DIR/t/$i.${sgen[$i]}.start"; srel[$i]=1
					echo "$now attached slot $i pid ${spid[$i]} after $((now - skill[$i]))s" >>"$DIR/events.log"
				elif [ $((now - skill[$i])) -ge 60 ]; then
					echo "soak-agent: pid ${spid[$i]} not attached within 60 s" | tee -a "$DIR/events.log"
					attach_missed=$((attach_missed + 1)); touch "$DIR/t/$i.${sgen[$i]}.start"; srel[$i]=2
				fi
			fi
			if [ "$now" -ge "${sdue[$i]}" ] && [ $((t_end - now)) -gt $((GAP_SECONDS + 30)) ]; then
				stops=$((stops + 1))
				if [ $((stops % 2)) = 1 ]; then
					kill -TERM "${spid[$i]}" 2>/dev/null || true; sstate[$i]=term; sdue[$i]=$((now + 2))
				else
					kill -KILL "${spid[$i]}" 2>/dev/null || true; wait "${spid[$i]}" 2>/dev/null || true
					sstate[$i]=gap; sdue[$i]=$((now + GAP_SECONDS)); spid[$i]=
				fi
				echo "$now stop slot $i ($([ "${sstate[$i]}" = term ] && echo TERM || echo KILL))" >>"$DIR/events.log"
			fi
			;;
		term)
			if [ "$now" -ge "${sdue[$i]}" ]; then
				kill -KILL "${spid[$i]}" 2>/dev/null || true; wait "${spid[$i]}" 2>/dev/null || true
				sstate[$i]=gap; sdue[$i]=$((now + GAP_SECONDS - 2)); spid[$i]=
			fi
			;;
		gap)
			if [ "$now" -ge "${sdue[$i]}" ] && [ $((t_end - now)) -gt 20 ]; then
				start_slot "$i"; sdue[$i]=$((now + LIFE_SECONDS))
			fi
			;;
		esac
	done
	sleep 1
done

kill "$SAMPLER" 2>/dev/null || true; wait "$SAMPLER" 2>/dev/null || true
stale=$(wc -l <"$DIR/stale.log")

# --- the end: every target's work done, its leaks held --------------------
alive_pids=()
for ((i = 0; i < TARGETS; i++)); do
	if [ "${sstate[$i]}" = term ]; then
		kill -KILL "${spid[$i]}" 2>/dev/null || true; wait "${spid[$i]}" 2>/dev/null || true; spid[$i]=
	fi
	[ -n "${spid[$i]}" ] && alive_pids+=("${spid[$i]}")
done
for ((w = 0; w < 120; w++)); do
	pending=0
	for ((i = 0; i < TARGETS; i++)); do
		[ -n "${spid[$i]}" ] && ! grep -q '^churn: leaked' "$DIR/t/$i.${sgen[$i]}.txt" && pending=$((pending + 1))
	done
	[ "$pending" = 0 ] && break
	sleep 1
done
sleep 25 # two more snapshots (--interval 10s) after the last leak
curl -sf "http://127.0.0.1:$PORT/metrics" >"$DIR/metrics-end.txt"
curl -sf -o "$DIR/leaks-end.pb.gz" "http://127.0.0.1:$PORT/debug/pprof/leaks"
fail=0
printf '%s\n' "${alive_pids[@]}" >"$DIR/alive-end.txt"
check_counts "$DIR" || fail=1
exact=$(cat "$DIR/exact.txt")

attaches=$(awk '/^leakscope_agent_attaches_total / {print $2}' "$DIR/metrics-end.txt")
detaches=$(awk '/^leakscope_agent_detaches_total / {print $2}' "$DIR/metrics-end.txt")
afail=$(awk '/^leakscope_agent_attach_failures_total / {print $2}' "$DIR/metrics-end.txt")
thinned=$(awk '/^leakscope_agent_history_thinned_total / {print $2}' "$DIR/metrics-end.txt")
hist=$(awk '/^leakscope_agent_history_bytes / {print $2}' "$DIR/metrics-end.txt")
serr=$(awk '/^leakscope_agent_snapshot_errors_total / {print $2}' "$DIR/metrics-end.txt")
lost=$(awk '/^leakscope_lost_total/ && !/unknown_frees/ {s += $NF} END {print s + 0}' "$DIR/metrics-end.txt")
nalive=${#alive_pids[@]}
if [ "$attaches" != "$starts" ] || [ "$detaches" != $((starts - nalive)) ] || [ "$afail" != 0 ] || [ "$attach_missed" != 0 ]; then
	echo "soak-agent: FAIL: $starts starts, $nalive alive: agent attached $attaches times, detached $detaches (want $((starts - nalive))), $afail attach failures, $attach_missed not attached in 60 s"
	fail=1
fi
want=$(printf '%s\n' "${alive_pids[@]}" | sort -u | tr '\n' ' ')
info=$(sed -n 's/^leakscope_target_info{pid="\([0-9]*\)".*/\1/p' "$DIR/metrics-end.txt" | sort -u)
gone=$(sed -n 's/^leakscope_target_exited_timestamp_seconds{pid="\([0-9]*\)".*/\1/p' "$DIR/metrics-end.txt" | sort -u)
info=$(comm -23 <(echo "$info") <(echo "$gone") | grep . | tr '\n' ' ' || true)
links=$(agent_links | tr '\n' ' ')
[ "$info" = "$want" ] || { echo "soak-agent: FAIL: leakscope_target_info pids not marked exited [$info], live targets [$want]"; fail=1; }
[ "$links" = "$want" ] || { echo "soak-agent: FAIL: the agent's uprobe links name pids [$links], live targets [$want]"; fail=1; }
[ "$stale" = 0 ] || { echo "soak-agent: FAIL: $stale samples found a link of an exited target (stale.log)"; fail=1; }
scrape_errors=$(wc -l <"$DIR/scrape-errors.log")
[ "$scrape_errors" = 0 ] || { echo "soak-agent: FAIL: $scrape_errors scrapes failed (scrape-errors.log)"; fail=1; }

# --- the agent exits: nothing of it is left in the kernel ----------------
agent_bpf_ids >"$DIR/agent-bpf-ids.txt"
held=$(awk '{ n[$1]++ } END { printf "%d links, %d maps, %d programs", n["link"], n["map"], n["prog"] }' "$DIR/agent-bpf-ids.txt")
kill -TERM "$AGENT"; wait "$AGENT" || true; AGENT=
sleep 1
{ bpftool -j link list | tr ',{' '\n\n' | sed -n 's/^"id":\([0-9]*\)/link \1/p'
  bpftool -j map list | tr ',{' '\n\n' | sed -n 's/^"id":\([0-9]*\)/map \1/p'
  bpftool -j prog list | tr ',{' '\n\n' | sed -n 's/^"id":\([0-9]*\)/prog \1/p'; } | sort -u >"$DIR/kernel-bpf-ids-after.txt"
left=$(comm -12 "$DIR/agent-bpf-ids.txt" "$DIR/kernel-bpf-ids-after.txt" | wc -l)
echo "agent held $held before exiting; $left of them left in the kernel after it exited" | tee -a "$DIR/summary.txt"
[ "$left" = 0 ] || { echo "soak-agent: FAIL: BPF objects of the agent outlived it:"; comm -12 "$DIR/agent-bpf-ids.txt" "$DIR/kernel-bpf-ids-after.txt" | head; fail=1; }

awk -F, -v slack="$RSS_SLACK_PCT" -v tck="$(getconf CLK_TCK)" -v warm="$WARMUP_SECONDS" 'NR > 1 { t[NR] = $1; r[NR] = $2; c[NR] = $3; n = NR }
END {
	s = 2; while (s < n && t[s] < warm) s++
	half = s + int((n - s + 1) / 2); m1 = 0; m2 = 0; lo = 0
	for (i = s; i <= n; i++) { if (lo == 0 || r[i] < lo) lo = r[i]; if (i < half) { if (r[i] > m1) m1 = r[i] } else { if (r[i] > m2) m2 = r[i] } }
	cpu = (c[n] - c[2]) / tck; span = t[n] - t[2]; pct = 0
	if (span > 0) pct = 100 * cpu / span
	printf "agent RSS after %ds of warm-up (%d samples, %ds to %ds): max %d KiB in the first half, %d KiB in the second (%+.1f%%), min %d KiB; CPU %.1fs over %ds (%.2f%% of a core)\n", warm, n - s + 1, t[s], t[n], m1, m2, 100 * (m2 - m1) / m1, lo, cpu, span, pct
	if (m2 > m1 * (1 + slack / 100)) { print "soak-agent: FAIL: RSS grew"; exit 1 }
}' "$DIR/rss.csv" | tee -a "$DIR/summary.txt" || fail=1
echo "soak-agent: $starts starts ($nalive alive at the end), $attaches attaches, $detaches detaches, $afail attach failures, $serr snapshot errors, $lost lost (besides unknown frees), history $hist bytes ($thinned thinned); counts exact for $exact of $nalive live targets; over ${SOAK_SECONDS}s; results in $DIR" | tee -a "$DIR/summary.txt"
echo "finished $(date -u +%Y-%m-%dT%H:%M:%SZ), exit $fail" | tee -a "$DIR/run.txt"
exit $fail

#!/usr/bin/env bash
# bench/stacks.sh - leakscope on 1M live allocations held by 100k distinct
# stacks (examples/bench/stacks_storm.c), as the real binary does it; method
# and results in docs/performance.md ("Tool memory at 1M live allocations
# on 100k stacks").
#
# Each repetition runs
#   leakscope run --max-sites 131072 --max-stacks 131072 --save C -- stacks_storm
# and reports:
#   - ready s:   from the start to the storm's "ready" line (its 1M mallocs
#                under the probes);
#   - memlock:   BPF map memory (memlock of leakscope's bpf-map fds, what
#                bpftool map show prints), 3 s after ready;
#   - hwm ready: leakscope's VmHWM then (first snapshot and a few periodic
#                ones done);
#   - end s:     from SIGTERM to the storm until leakscope exits: detach,
#                read 1M live allocations, rank, write the text report, end
#                the capture file;
#   - peak hwm:  leakscope's VmHWM, polled every 0.1 s, to the end;
#   - cpu:       leakscope's user and system CPU time, start to end (GNU
#                time), and the maximum RSS GNU time saw;
# then `leakscope report --format F C` for every format: wall time and
# maximum RSS (GNU time).
#
# Environment:
#   LEAKSCOPE=bin/leakscope  the binary (another one to compare builds)
#   REPS=2                   repetitions
#   SAVE=1                   0: no --save (and no report phase)
#   LSFLAGS=                 more flags for run and report, e.g.
#                            "--memory-limit 0"
#   RAW=bin/bench/stacks-<stamp>  where outputs go
# Needs root and gcc.
set -euo pipefail
cd "$(dirname "$0")/.."

LEAKSCOPE=${LEAKSCOPE:-bin/leakscope}
REPS=${REPS:-2}
SAVE=${SAVE:-1}
LSFLAGS=${LSFLAGS:-}
RAW=${RAW:-bin/bench/stacks-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RAW"
[ "$LEAKSCOPE" != bin/leakscope ] || make -s build
gcc -O2 -g -fno-omit-frame-pointer -o "$RAW/stacks_storm" examples/bench/stacks_storm.c

hwm_of() { awk '/^VmHWM:/{print $2}' "/proc/$1/status" 2>/dev/null || true; }

echo "leakscope: $LEAKSCOPE; load $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq 1 "$REPS"); do
	save=()
	[ "$SAVE" = 1 ] && save=(--save "$RAW/c.capture")
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # LSFLAGS is words
	/usr/bin/time -f "%U %S %M" -o "$RAW/time.$rep" \
		"$LEAKSCOPE" run --progress never --max-sites 131072 --max-stacks 131072 $LSFLAGS \
		-o "$RAW/report.txt" "${save[@]}" -- "$RAW/stacks_storm" 2>"$RAW/stderr.$rep" &
	tp=$!
	lp=""
	while [ -z "$lp" ] && kill -0 "$tp" 2>/dev/null; do
		lp=$(pgrep -P "$tp" || true) # GNU time's one child: $LEAKSCOPE, whatever its name
	done
	hwm=0 ready="" t1=0 memlock=0 hwm_ready=0
	while kill -0 "$lp" 2>/dev/null; do
		h=$(hwm_of "$lp"); [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
		if [ -z "$ready" ] && grep -q "stacks_storm: ready" "$RAW/stderr.$rep"; then
			ready=$(($(date +%s%N) - t0))
			sleep 3
			for fd in /proc/"$lp"/fd/*; do
				[[ $(readlink "$fd") == anon_inode:bpf-map ]] || continue
				m=$(awk '/^memlock:/{print $2}' /proc/"$lp"/fdinfo/"${fd##*/}")
				memlock=$((memlock + m))
			done
			hwm_ready=$(hwm_of "$lp")
			t1=$(date +%s%N)
			kill -TERM $(pgrep -P "$lp" -x stacks_storm)
		fi
		sleep 0.1
	done
	wait "$tp"
	t2=$(date +%s%N)
	read -r user sys maxrss <"$RAW/time.$rep"
	printf 'rep %d: ready %.1f s, memlock %d MiB, hwm ready %d MiB, end %.2f s, peak hwm %d MiB, cpu %s s user %s s sys (max RSS %d MiB)\n' \
		"$rep" "$(echo "$ready/1000000000" | bc -l)" $((memlock >> 20)) $((hwm_ready >> 10)) \
		"$(echo "($t2-$t1)/1000000000" | bc -l)" $((hwm >> 10)) "$user" "$sys" $((maxrss >> 10))
done

[ "$SAVE" = 1 ] || exit 0
echo "capture: $(du -m "$RAW/c.capture" | cut -f1) MB"
for rep in $(seq 1 "$REPS"); do
	for f in text json html pprof; do
		# shellcheck disable=SC2086
		/usr/bin/time -f "report --format $f: %e s, %U s user, max RSS %M KB" \
			"$LEAKSCOPE" report $LSFLAGS --format "$f" -o "$RAW/report.$f" "$RAW/c.capture"
	done
done 2>&1

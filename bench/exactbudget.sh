#!/bin/bash
# bench/exactbudget.sh: what the exact budget (--sample-exact) costs a
# sampled target. The alloc storm under leakscope run --sample-bytes
# 512KiB with the default budget, with --sample-exact 0, and the sampled
# floor (--probes-only), alternated ROUNDS times; prints each run's
# target CPU (the storm's own cpu_user_us + cpu_sys_us) and the median per
# mode. As root, after make build.
#
#   ROUNDS=3 PAIRS=1000000 bench/exactbudget.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
PAIRS=${PAIRS:-1000000}
mkdir -p bin/bench
gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -no-pie -pthread -o bin/bench/alloc_storm examples/bench/alloc_storm.c
declare -A runs
modes=(budget nobudget floor)
for r in $(seq "$ROUNDS"); do
	for m in "${modes[@]}"; do
		case $m in
		budget) extra=() ;;
		nobudget) extra=(--sample-exact 0) ;;
		floor) extra=(--probes-only) ;;
		esac
		err=$(bin/leakscope run --progress never --sample-bytes 512KiB "${extra[@]}" --format json -o /dev/null -- \
			bin/bench/alloc_storm --pairs "$PAIRS" 2>&1 >/dev/null | grep 'alloc_storm:')
		u=$(sed -E 's/.*cpu_user_us ([0-9]+).*/\1/' <<<"$err")
		s=$(sed -E 's/.*cpu_sys_us ([0-9]+).*/\1/' <<<"$err")
		cpu=$(( (u + s) / 1000 ))
		echo "round $r $m: target CPU ${cpu} ms (user $((u / 1000)), sys $((s / 1000)))"
		runs[$m]+="$cpu "
	done
done
for m in "${modes[@]}"; do
	med=$(tr ' ' '\n' <<<"${runs[$m]}" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	echo "median $m: ${med} ms (${runs[$m]% })"
done

#!/usr/bin/env bash
# bench/maps.sh - what --maps (the mmap, munmap, mremap tracepoints and the
# thread start/exit programs) costs: the allocation storm and a mapping
# storm (examples/bench/), each bare, under `leakscope run` and under
# `leakscope run --maps`, the three alternated in a rotated order, REPS
# times; method and results in docs/performance.md ("Mappings and
# threads").
#
# Per workload and configuration it prints the mean target CPU (user +
# system, the storm's own getrusage: the kernel's time in the probes and
# tracepoints that fire in its threads is in it) and the mean per call over
# the bare run; with --maps, it checks the mapping storm's leak is exact
# (100 mmap.anon mappings, 1638400 bytes, in leak_storm_map).
#
# Environment:
#   LEAKSCOPE=bin/leakscope  the binary
#   REPS=3                   repetitions
#   RAW=bin/bench/maps-<stamp>  where outputs go
# Needs root and gcc. Prints a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

LEAKSCOPE=${LEAKSCOPE:-bin/leakscope}
REPS=${REPS:-3}
RAW=${RAW:-bin/bench/maps-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$RAW"
[ "$LEAKSCOPE" != bin/leakscope ] || make -s build >&2
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$RAW/alloc_storm" examples/bench/alloc_storm.c
gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$RAW/mmap_storm" examples/bench/mmap_storm.c

cpu_of() { # summary line -> user+sys µs
	sed -n 's/.*cpu_user_us \([0-9]*\) cpu_sys_us \([0-9]*\).*/\1 \2/p' "$1" | awk '{print $1 + $2}'
}
calls_of() { # the storm's calls counter
	sed -n 's/.*\(allocator \)\{0,1\}calls \([0-9]*\);.*/\2/p' "$1"
}

configs=(bare leakscope maps)
echo "leakscope: $LEAKSCOPE; load $(cut -d' ' -f1-3 /proc/loadavg); $REPS repetitions" >&2
for rep in $(seq 1 "$REPS"); do
	for storm in alloc mmap; do
		for i in 0 1 2; do
			cfg=${configs[$(((i + rep - 1) % 3))]}
			base=$RAW/$storm.$cfg.$rep
			case $cfg in
			bare) cmd=("$RAW/${storm}_storm") ;;
			leakscope) cmd=("$LEAKSCOPE" run --progress never --format json -o "$base.json" -- "$RAW/${storm}_storm") ;;
			maps) cmd=("$LEAKSCOPE" run --progress never --format json --maps -o "$base.json" -- "$RAW/${storm}_storm") ;;
			esac
			"${cmd[@]}" >/dev/null 2>"$base.err" || { cat "$base.err" >&2; exit 2; }
			grep -h "^${storm}_storm: " "$base.err" >"$base.line"
			echo "  $storm $cfg rep $rep: cpu $(cpu_of "$base.line") us" >&2
			if [ "$storm.$cfg" = mmap.maps ]; then
				got=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
n = b = 0
for l in r["leaks"]:
    if l["kind"] == "mmap.anon" and any(f.get("function") == "leak_storm_map" for f in l["frames"]):
        n += l["outstanding_count"]; b += l["outstanding_bytes"]
print(n, b)' "$base.json")
				[ "$got" = "100 1638400" ] || { echo "mmap_storm under --maps: leak_storm_map holds $got, want 100 1638400" >&2; exit 1; }
			fi
		done
	done
done

echo "| workload | calls | bare CPU | leakscope | leakscope --maps | --maps on top, per call |"
echo "|---|---|---|---|---|---|"
for storm in alloc mmap; do
	declare -A sum=()
	for cfg in "${configs[@]}"; do
		s=0
		for rep in $(seq 1 "$REPS"); do
			s=$((s + $(cpu_of "$RAW/$storm.$cfg.$rep.line")))
		done
		sum[$cfg]=$((s / REPS))
	done
	calls=$(calls_of "$RAW/$storm.bare.1.line")
	awk -v w="$storm storm" -v c="$calls" -v b="${sum[bare]}" -v l="${sum[leakscope]}" -v m="${sum[maps]}" 'BEGIN {
		printf "| %s | %d | %.0f ms | %.0f ms (%.2fx) | %.0f ms (%.2fx) | %+.3f us |\n", w, c, b/1000, l/1000, l/b, m/1000, m/b, (m-l)/c
	}'
	unset sum
done

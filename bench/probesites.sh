#!/usr/bin/env bash
# bench/probesites.sh OLD NEW - the alloc storm under two leakscope builds,
# alternated, to compare probe-site selections (docs/performance.md, "Where
# a call's cost goes"). Each repetition runs bare, OLD and NEW in an order rotated by
# repetition, for the malloc storm and the posix_memalign storm (--align 64).
# Prints one line per run: storm tool rep storm_ns cpu_us calls.
#   REPS=5  PAIRS=1000000  ALIGN_PAIRS=300000
set -euo pipefail
old=$1 new=$2
REPS=${REPS:-5} PAIRS=${PAIRS:-1000000} ALIGN_PAIRS=${ALIGN_PAIRS:-300000}
dir=$(mktemp -d)
cd "$(dirname "$0")/.."
gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -no-pie -pthread -o "$dir/alloc_storm" examples/bench/alloc_storm.c
run() { # storm tool rep args...
	local storm=$1 tool=$2 rep=$3
	shift 3
	local cmd=("$dir/alloc_storm" "$@")
	case $tool in
	old) cmd=("$old" run --progress never --format json -o "$dir/out.json" -- "${cmd[@]}") ;;
	new) cmd=("$new" run --progress never --format json -o "$dir/out.json" -- "${cmd[@]}") ;;
	esac
	"${cmd[@]}" 2>"$dir/err" >/dev/null
	awk -v s="$storm" -v t="$tool" -v r="$rep" '/^alloc_storm:/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "storm_ns") ns = $(i + 1)
			if ($i == "cpu_user_us") u = $(i + 1)
			if ($i == "cpu_sys_us") k = $(i + 1)
			if ($i == "calls") c = $(i + 1)
		}
		gsub(";", "", ns); gsub(";", "", c)
		print s, t, r, ns, u + k, c
	}' "$dir/err"
}
tools=(bare old new)
for rep in $(seq 1 "$REPS"); do
	for i in 0 1 2; do
		tool=${tools[$(((i + rep) % 3))]}
		run malloc "$tool" "$rep" --pairs "$PAIRS"
		run memalign "$tool" "$rep" --pairs "$ALIGN_PAIRS" --align 64
	done
done
rm -rf "$dir"

#!/usr/bin/env bash
# bench/probesites.sh OLD NEW - the alloc storm under two leakscope builds,
# alternated, to compare probe-site selections (docs/performance.md, "Where
# a call's cost goes"), exact mode. Each repetition runs bare, OLD and NEW in
# an order rotated by repetition: the malloc storm under each allocator
# (glibc; jemalloc, tcmalloc and mimalloc by LD_PRELOAD; musl by a musl-gcc
# build; those not installed are left out) and the posix_memalign storm
# (--align 64) under glibc.
# Prints one line per run: storm allocator tool rep storm_ns cpu_us calls;
# then, per storm and allocator, the medians' CPU cost per allocator call
# each tool adds to the bare run: summary storm allocator tool us_per_call.
#   REPS=5  PAIRS=200000  ALIGN_PAIRS=300000  THREADS=2 (storm threads;
#   with 2, musl's single malloc lock makes its CPU time vary run to run)
set -euo pipefail
old=$1 new=$2
REPS=${REPS:-5} PAIRS=${PAIRS:-200000} ALIGN_PAIRS=${ALIGN_PAIRS:-300000} THREADS=${THREADS:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$(dirname "$0")/.."
gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -no-pie -pthread -o "$dir/alloc_storm" examples/bench/alloc_storm.c
lib=/usr/lib/x86_64-linux-gnu
allocators=(glibc)
for a in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc.so.4 mimalloc:libmimalloc.so.2; do
	[ -f "$lib/${a#*:}" ] && allocators+=("$a")
done
if command -v musl-gcc >/dev/null; then
	musl-gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -pthread -o "$dir/alloc_storm-musl" examples/bench/alloc_storm.c
	allocators+=(musl)
fi
run() { # storm allocator tool rep args...
	local storm=$1 alloc=$2 tool=$3 rep=$4
	shift 4
	local cmd=("$dir/alloc_storm" --threads "$THREADS" "$@")
	case $alloc in
	glibc) ;;
	musl) cmd=("$dir/alloc_storm-musl" --threads "$THREADS" "$@") ;;
	*) cmd=(env "LD_PRELOAD=$lib/${alloc#*:}" "${cmd[@]}") ;;
	esac
	case $tool in
	old) cmd=("$old" run --progress never --format json -o "$dir/out.json" -- "${cmd[@]}") ;;
	new) cmd=("$new" run --progress never --format json -o "$dir/out.json" -- "${cmd[@]}") ;;
	esac
	"${cmd[@]}" 2>"$dir/err" >/dev/null
	awk -v s="$storm" -v a="${alloc%%:*}" -v t="$tool" -v r="$rep" '/^alloc_storm:/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "storm_ns") ns = $(i + 1)
			if ($i == "cpu_user_us") u = $(i + 1)
			if ($i == "cpu_sys_us") k = $(i + 1)
			if ($i == "calls") c = $(i + 1)
		}
		gsub(";", "", ns); gsub(";", "", c)
		print s, a, t, r, ns, u + k, c
	}' "$dir/err" | tee -a "$dir/runs"
}
tools=(bare old new)
for rep in $(seq 1 "$REPS"); do
	for i in 0 1 2; do
		tool=${tools[$(((i + rep) % 3))]}
		for a in "${allocators[@]}"; do
			run malloc "$a" "$tool" "$rep" --pairs "$PAIRS"
		done
		run memalign glibc "$tool" "$rep" --pairs "$ALIGN_PAIRS" --align 64
	done
done
# Medians of CPU µs per storm, allocator and tool; the tools' cost per call
# over the bare run's median.
sort -k1,1 -k2,2 -k3,3 -k6,6n "$dir/runs" | awk '
	{ k = $1 " " $2 " " $3; v[k, ++n[k]] = $6; calls[$1 " " $2] = $7 }
	END {
		for (k in n) {
			m = n[k]
			med[k] = (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2
		}
		for (k in med) {
			split(k, f, " ")
			if (f[3] == "bare") continue
			b = med[f[1] " " f[2] " bare"]
			printf "summary %s %s %s %.2f\n", f[1], f[2], f[3], (med[k] - b) / calls[f[1] " " f[2]]
		}
	}' | sort

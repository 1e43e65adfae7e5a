#!/usr/bin/env bash
# bench/progtime.sh [OLD] NEW - the BPF programs' own time per run on the
# alloc storm (docs/performance.md, "Where a call's cost goes"), under one
# or two leakscope builds (or more, each as NAME=BUILD), alternated.
#
# Each repetition runs, for each storm thread count (THREADS), the storm under
# `leakscope run` of every build given, in an order rotated by repetition,
# with kernel.bpf_stats_enabled=1 (restored afterwards): the kernel then
# counts each program's runs and the time spent in them (fdinfo run_cnt,
# run_time_ns). The counters of leakscope's own program fds are read while
# the storm holds after its work, and the programs named with bpftool.
# Prints one line per run:
#   build threads rep alloc_session_ns_per_run free_ns_per_run ns_per_pair load
# (ns_per_pair: both programs' time over the frees counted) and,
# at the end, the medians per build and thread count.
#   REPS=5  PAIRS=1000000  THREADS="1 2"  HOLD_MS=3000
# Needs root and bpftool.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 [OLD] NEW | NAME=BUILD..." >&2; exit 2; }
builds=() names=()
for b in "$@"; do
	name=""
	case $b in *=*) name=${b%%=*} b=${b#*=} ;; esac
	builds+=("$(realpath "$b")")
	names+=("$name")
done
# Unnamed: old and new, or new alone.
if [ -z "${names[0]}" ]; then
	case $# in 1) names=(new) ;; 2) names=(old new) ;; *) for i in "${!names[@]}"; do names[i]=b$i; done ;; esac
fi
REPS=${REPS:-5} PAIRS=${PAIRS:-1000000} THREADS=${THREADS:-"1 2"} HOLD_MS=${HOLD_MS:-3000}
command -v bpftool >/dev/null || { echo "progtime: needs bpftool" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "progtime: needs root" >&2; exit 2; }
for b in "${builds[@]}"; do [ -x "$b" ] || { echo "progtime: $b is not executable" >&2; exit 2; }; done
dir=$(mktemp -d)
cd "$(dirname "$0")/.."
gcc -O2 -g -Wall -Wextra -fno-omit-frame-pointer -no-pie -pthread -o "$dir/alloc_storm" examples/bench/alloc_storm.c

old_stats=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$old_stats"; rm -rf "$dir"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# progs PID: "prog_id run_cnt run_time_ns" for every BPF program fd of PID
# (a program's fdinfo has run_cnt; a link's names its program but has
# none). One awk over them all: the storm keeps both CPUs busy, and a
# process per fd would take seconds to start.
progs() {
	awk '/^prog_id:/{id[FILENAME]=$2} /^run_cnt:/{c[FILENAME]=$2} /^run_time_ns:/{t[FILENAME]=$2}
		END{for (f in c) if (f in id) print id[f], c[f], t[f]}' /proc/"$1"/fdinfo/* 2>/dev/null || true
}

# name_progs SNAPSHOT: append "prog_id name" to $dir/names for each
# program of SNAPSHOT that ran and is not named yet, while its id is live.
name_progs() {
	local id
	for id in $(printf '%s\n' "$1" | awk '$2 > 0 {print $1}'); do
		grep -q "^$id " "$dir/names" 2>/dev/null && continue
		bpftool prog show id "$id" 2>/dev/null |
			awk -v id="$id" 'NR==1{for(i=1;i<=NF;i++) if($i=="name") print id, $(i+1)}' >>"$dir/names"
	done
}

# run BUILD NAME THREADS REP: one storm; prints its line.
run() {
	local bin=$1 name=$2 threads=$3 rep=$4 load snap="" s lpid
	load=$(cut -d' ' -f1 /proc/loadavg)
	"$bin" run --progress never --format json -o "$dir/out.json" -- \
		"$dir/alloc_storm" --threads "$threads" --pairs "$PAIRS" --hold "$HOLD_MS" >/dev/null 2>"$dir/err" &
	lpid=$!
	# The last sample before the storm's summary line (printed after its
	# hold) holds every run of the storm.
	while kill -0 "$lpid" 2>/dev/null && ! grep -q storm_ns "$dir/err"; do
		s=$(progs "$lpid")
		if [ -n "$s" ] && ! grep -q storm_ns "$dir/err"; then
			snap=$s
			name_progs "$s"
		fi
		sleep 0.3
	done
	wait "$lpid" || true
	[ -n "$snap" ] || { echo "progtime: no program counters read ($name, $threads threads): $(tail -3 "$dir/err")" >&2; return; }
	printf '%s\n' "$snap" | python3 -c '
import sys
names = dict((int(i), n) for i, n in (l.split() for l in open(sys.argv[1]) if l.strip()))
got = {}
for line in sys.stdin:
    i, c, t = map(int, line.split())
    n = names.get(i, "")
    if n == "alloc_session" or n.startswith("free_enter"):
        k = "alloc" if n == "alloc_session" else "free"
        a = got.setdefault(k, [0, 0])
        a[0] += c; a[1] += t
def per(k):
    c, t = got.get(k, [0, 0])
    return t / c if c else float("nan")
# Per pair: one free and the two session runs (entry, return) of a malloc.
total = sum(t for c, t in got.values())
frees = got.get("free", [0, 0])[0]
print(sys.argv[2], sys.argv[3], sys.argv[5], "%.1f" % per("alloc"), "%.1f" % per("free"), "%.1f" % (total / frees if frees else float("nan")), sys.argv[6])
' "$dir/names" "$name" "$threads" "$PAIRS" "$rep" "$load" | tee -a "$dir/lines"
}

echo "# build threads rep alloc_session_ns/run free_ns/run ns/pair load1"
n=${#builds[@]}
for rep in $(seq 1 "$REPS"); do
	for threads in $THREADS; do
		for i in $(seq 0 $((n - 1))); do
			j=$(((i + rep) % n))
			run "${builds[$j]}" "${names[$j]}" "$threads" "$rep"
		done
	done
done
echo "# medians: build threads alloc_session_ns/run free_ns/run ns/pair (reps)"
python3 -c '
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    b, t, r, a, f, p, l = line.split()
    rows.setdefault((b, int(t)), []).append((float(a), float(f), float(p)))
order = sys.argv[2].split()
for (b, t), v in sorted(rows.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0]))):
    m = [statistics.median(x[i] for x in v) for i in range(3)]
    print(b, t, "%.1f %.1f %.1f" % tuple(m), "(%d)" % len(v))
' "$dir/lines" "${names[*]}"


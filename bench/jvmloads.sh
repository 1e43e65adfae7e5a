#!/usr/bin/env bash
# bench/jvmloads.sh: a JVM loading a library every 20 ms, bare and under
# leakscope run, alternated ROUNDS times (default 3). Under run the kernel
# stops the JVM around each dlopen until leakscope has read the new
# library; this measures what that costs the JVM (its own uptime, and the
# loop's time) and prints run's stop counts. Needs root, gcc and a JDK.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
N=${N:-100}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
make -s build
echo 'int leakscope_bench_lib(void) { return 42; }' >"$dir/tiny.c"
gcc -shared -fPIC -O2 -o "$dir/tiny.so" "$dir/tiny.c"
for i in $(seq 1 "$N"); do cp "$dir/tiny.so" "$dir/lib$i.so"; done
javac -d "$dir" bench/java/LoadLoop.java
uptime_of() { sed -n 's/.*JVM up \([0-9]*\) ms.*/\1/p'; }
for r in $(seq 1 "$ROUNDS"); do
	b=$(java -cp "$dir" LoadLoop "$dir" "$N" | uptime_of)
	t=$(./bin/leakscope run --progress never --format json -o "$dir/r.json" -- java -cp "$dir" LoadLoop "$dir" "$N" 2>/dev/null | uptime_of)
	stops=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["target"].get("stops") or {}; print(s.get("count",0), round(s.get("longest_seconds",0)*1000,1), round(s.get("total_seconds",0)*1000,1))' "$dir/r.json")
	echo "round $r: JVM uptime bare ${b} ms, under run ${t} ms ($(python3 -c "print(round($t/$b,2))")x); stops: count, longest ms, total ms = $stops"
done

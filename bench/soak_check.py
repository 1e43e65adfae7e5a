#!/usr/bin/env python3
"""bench/soak_check.py - the checks of bench/soak.sh (make soak).

Reads one soak run's directory (stderr.log, soak.json, capture.json,
soak.capture, rss.csv), prints one line per fact and per check ("ok" or
"FAIL") and exits 1 when a check failed. It can be run again on a finished
run: python3 bench/soak_check.py bin/soak/run-<stamp>
"""
import argparse
import csv
import json
import os
import re
import sys

# glibc's per-thread cache, handed to free when a thread exits
# (tcache_thread_shutdown): at most 7 blocks in each of 64 bins, all already
# freed by the program, plus the cache's own block, allocated inside malloc.
# leakscope saw none of them allocated: they count as unknown_frees.
TCACHE_FREES = 64 * 7 + 1

SUMMARY = re.compile(
    r"leaked (\d+) blocks, (\d+) bytes in leak_in_worker; "
    r"leaked (\d+) blocks, (\d+) bytes in leak_grown_buffer.*"
    r"threads (\d+);.*thread-rounds (\d+);.*calls (.*)$")


class Checks:
    def __init__(self):
        self.ok = True

    def info(self, msg):
        print("     " + msg)

    def check(self, cond, msg):
        print(("ok   " if cond else "FAIL ") + msg)
        self.ok = self.ok and bool(cond)


def rows_by_top_frame(report):
    """Sums the report's leak rows by their top frame: a site is a call
    stack, and one function may allocate from several."""
    sums = {}
    for leak in report["leaks"]:
        top = leak["frames"][0]["function"] if leak["frames"] else ""
        s = sums.setdefault(top, {"count": 0, "bytes": 0, "allocs": 0, "frees": 0, "rows": 0})
        s["count"] += leak["outstanding_count"]
        s["bytes"] += leak["outstanding_bytes"]
        s["allocs"] += leak["allocs"]
        s["frees"] += leak["frees"]
        s["rows"] += 1
    return sums


def check_report(c, d, name, R, threads):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        c.check(False, "%s written" % name)
        return
    with open(path) as f:
        r = json.load(f)
    sums = rows_by_top_frame(r)
    zero = {"count": 0, "bytes": 0, "allocs": 0, "frees": 0, "rows": 0}
    w, g = sums.get("leak_in_worker", zero), sums.get("leak_grown_buffer", zero)
    c.info("%s: traced %.0fs; leak_in_worker %d blocks, %d bytes (%d allocs, %d frees, %d rows); "
           "leak_grown_buffer %d blocks, %d bytes (%d rows)" %
           (name, r["duration_seconds"], w["count"], w["bytes"], w["allocs"], w["frees"], w["rows"],
            g["count"], g["bytes"], g["rows"]))
    c.check((w["count"], w["bytes"]) == (25 * R, 8000 * R),
            "%s: leak_in_worker = 25R = %d blocks, 8000R = %d bytes" % (name, 25 * R, 8000 * R))
    c.check((w["allocs"], w["frees"]) == (25 * R, 0), "%s: leak_in_worker allocs 25R, frees 0" % name)
    c.check((g["count"], g["bytes"]) == (R, 5000 * R),
            "%s: leak_grown_buffer = R = %d blocks, 5000R = %d bytes" % (name, R, 5000 * R))
    lost = r["lost"]
    c.info("%s: lost %s" % (name, json.dumps(lost, sort_keys=True)))
    c.check(all(v == 0 for k, v in lost.items() if k != "unknown_frees"),
            "%s: every lost counter but unknown_frees is 0" % name)
    unknown = lost.get("unknown_frees", 0)
    c.check(unknown <= TCACHE_FREES * threads,
            "%s: unknown_frees %d <= %d x %d (glibc's thread caches, freed at thread exit)" %
            (name, unknown, TCACHE_FREES, threads))
    if name == "soak.json":
        code = r["target"].get("exit_code")
        c.check(code in (0, None), "target exit code 0 or unknown (leakscope stopped first): %s" % code)


def check_capture(c, d, R, threads, allocating_calls):
    """Every allocation churn made was seen: the capture's per-site totals at
    the end, over all sites, against churn's own call counts."""
    path = os.path.join(d, "soak.capture")
    end, snapshots = None, 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "end":
                end = rec["end"]
            elif rec.get("type") == "snapshot":
                snapshots += 1
    if end is None:
        c.check(False, "soak.capture has its end record")
        return
    allocs = sum(s["allocs"] for s in end["sites"])
    frees = sum(s["frees"] for s in end["sites"])
    live = sum(s["live_count"] for s in end["sites"])
    c.info("soak.capture: %d bytes, %d snapshots, %d sites; %d allocations, %d releases, %d live" %
           (os.path.getsize(path), snapshots, len(end["sites"]), allocs, frees, live))
    # Traced from exec, leakscope also sees pthread_create's T DTV blocks
    # (examples/README.md, "libc-internal allocation").
    c.check(allocs == allocating_calls + threads,
            "every allocation seen: %d = churn's %d allocating calls + %d DTV blocks" %
            (allocs, allocating_calls, threads))
    c.check(live == 26 * R + threads, "live at the end: %d = 26R + %d DTV blocks" % (26 * R + threads, threads))


def check_rss(c, d, slack):
    with open(os.path.join(d, "rss.csv")) as f:
        rows = [(int(a), int(b), float(t)) for a, b, t in list(csv.reader(f))[1:]]
    if len(rows) < 4:
        c.check(False, "at least 4 RSS samples (got %d)" % len(rows))
        return
    half = rows[-1][0] / 2
    first = [b for a, b, _ in rows if a <= half]
    second = [b for a, b, _ in rows if a > half]
    rss = [b for _, b, _ in rows]
    c.info("RSS (KiB), %d samples over %ds: first %d, last %d, min %d, max %d; CPU %.2fs" %
           (len(rows), rows[-1][0], rss[0], rss[-1], min(rss), max(rss), rows[-1][2]))
    c.info("RSS (KiB): first half max %d; second half min %d, max %d, first %d, last %d" %
           (max(first), min(second), max(second), second[0], second[-1]))
    c.check(max(second) <= max(first) * (1 + slack / 100),
            "RSS stable: second-half max within %g%% of first-half max (%+.1f%%)" %
            (slack, 100.0 * (max(second) - max(first)) / max(first)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slack-pct", type=float, default=10)
    ap.add_argument("--threads", type=int, default=4, help="churn --threads")
    ap.add_argument("dir")
    args = ap.parse_args()
    c = Checks()

    summary = ""
    with open(os.path.join(args.dir, "stderr.log")) as f:
        for line in f:
            if line.startswith("churn: leaked"):
                summary = line.strip()
                break
    m = SUMMARY.search(summary)
    if not m:
        print("FAIL churn's summary line missing or malformed: %r" % summary)
        return 1
    w_n, w_b, g_n, g_b, threads, R = map(int, m.groups()[:6])
    calls = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(7))}
    allocating = sum(v for k, v in calls.items() if k != "free")
    c.info("churn: %d threads, %d thread-rounds; says %d blocks, %d bytes in leak_in_worker, "
           "%d blocks, %d bytes in leak_grown_buffer; %d allocating calls, %d frees" %
           (threads, R, w_n, w_b, g_n, g_b, allocating, calls.get("free", 0)))
    c.check(threads == args.threads, "churn ran %d threads" % args.threads)
    c.check(R > 0 and (w_n, w_b, g_n, g_b) == (25 * R, 8000 * R, R, 5000 * R),
            "churn's own counts are 25R/8000R and R/5000R")

    for name in ("soak.json", "capture.json"):
        check_report(c, args.dir, name, R, threads)
    check_capture(c, args.dir, R, threads, allocating)
    check_rss(c, args.dir, args.slack_pct)
    return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Summarize one bench/run.sh run directory as markdown on stdout.

Usage: python3 bench/report.py bin/bench/run-<stamp>

Reads the timed runs (<storm>.<tool>.<rep>.{wall,time,err,json,heaptrack.zst,bt}),
checks every run's report against the storm's ground truth, and prints the
results table, the fixed costs, BPF memory, per-program BPF time, the Go
benchmarks and the issue's targets. Definitions are in docs/performance.md.
"""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

RAW = sys.argv[1]
TOOLS = ["bare", "leakscope", "sampled", "nomalloc", "floor", "floorsampled", "heaptrack", "bpftrace"]
LABEL = {"leakscope": "leakscope (exact)", "sampled": "leakscope, sampled (`--sample-bytes %s`)",
         "nomalloc": "leakscope, `--malloc off`",
         "floor": "floor: leakscope's exact probes, empty programs (`--probes-only`)",
         "floorsampled": "floor: sampled probes, empty programs (`--probes-only --sample-bytes %s`)"}
FLOOR = {"leakscope": "floor", "sampled": "floorsampled"}

# Ground truth, from the storms' summary lines (checked against them below).
STORMS = {
    "alloc": {"fn": "leak_storm_block", "kind": "malloc", "title": "alloc storm (2 threads x 1M malloc/free, 16 B-4 KiB)"},
    "zlib": {"fn": "leak_inflate_stream", "kind": "zlib.inflate", "title": "zlib storm (100k inflate streams)"},
}


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def context():
    ctx = {}
    for line in read(os.path.join(RAW, "context.txt")).splitlines():
        k, _, v = line.partition("=")
        ctx[k] = v
    return ctx


def summary(err):
    """Parses a storm's summary line."""
    m = {}
    line = next((l for l in err.splitlines() if "_storm:" in l and "storm_ns" in l), "")
    if not line:
        return None
    for key in ("storm_ns", "cpu_user_us", "cpu_sys_us", "maxrss_kb"):
        r = re.search(key + r" (\d+)", line)
        m[key] = int(r.group(1)) if r else 0
    m["calls"] = int(re.search(r"allocator calls (\d+)", line).group(1))
    r = re.search(r"leaked (\d+) inflate streams \((\d+) blocks, (\d+) bytes\) in (\w+)", line)
    if r:
        m["units"], m["blocks"], m["bytes"], m["fn"] = int(r.group(1)), int(r.group(2)), int(r.group(3)), r.group(4)
    else:
        r = re.search(r"leaked (\d+) blocks, (\d+) bytes in (\w+)", line)
        m["blocks"], m["bytes"], m["fn"] = int(r.group(1)), int(r.group(2)), r.group(3)
        m["units"] = m["blocks"]
    return m


def gnu_time(text):
    t = {}
    for key, name in (("User time (seconds)", "user"), ("System time (seconds)", "sys"), ("Maximum resident set size (kbytes)", "maxrss_kb")):
        r = re.search(re.escape(key) + r": ([\d.]+)", text)
        t[name] = float(r.group(1)) if r else 0.0
    return t


# ------------------------------------------------------------------ exactness checks

def check_leakscope(base, truth, storm):
    try:
        with open(base + ".json") as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        return False, "no report (%s)" % e
    rows = [l for l in rep.get("leaks", []) if l.get("frames") and l["frames"][0].get("function") == truth["fn"]]
    count = sum(l["outstanding_count"] for l in rows)
    nbytes = sum(l["outstanding_bytes"] for l in rows)
    kinds = sorted({l["kind"] for l in rows})
    want_kind = STORMS[storm]["kind"]
    ok = count == truth["units"] and nbytes == truth["bytes"] and kinds == [want_kind]
    unit = "streams" if want_kind.startswith("zlib") else "blocks"
    msg = "%d %s, %d B in %d row(s) %s" % (count, unit, nbytes, len(rows), "/".join(kinds) or "-")
    if rep.get("sample_bytes"):
        # Sampled counts are estimates: say how far off, never "exact".
        return None, "estimate %s (truth %d %s, %d B)" % (msg, truth["units"], unit, truth["bytes"])
    lost = {k: v for k, v in rep.get("lost", {}).items() if v}
    if lost:
        msg += "; lost " + ", ".join("%s %d" % kv for kv in sorted(lost.items()))
    return ok, msg


def check_heaptrack(base, truth, storm):
    files = glob.glob(base + ".heaptrack*")
    if not files:
        return False, "no heaptrack data"
    fg = base + ".flame"
    cmd = ["heaptrack_print", "-f", files[0], "--print-leaks", "1", "--print-peaks", "0",
           "--print-allocators", "0", "--print-temporary", "0",
           "--filter-bt-function", truth["fn"], "-F", fg, "--flamegraph-cost-type", "leaked"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    # "X leaked over N calls from:" heads each caller path of a leak site;
    # with the filter only paths through the leaking function remain.
    blocks = sum(int(n) for n in re.findall(r"leaked over (\d+) calls from:\n", out))
    nbytes = 0
    for line in read(fg).splitlines():
        stack, _, cost = line.rpartition(" ")
        if truth["fn"] in stack and cost.isdigit():
            nbytes += int(cost)
    ok = blocks == truth["blocks"] and nbytes == truth["bytes"]
    return ok, "%d blocks, %d B under %s" % (blocks, nbytes, truth["fn"])


def symbolize(binary, addrs):
    if not addrs:
        return {}
    out = subprocess.run(["addr2line", "-f", "-e", binary] + ["0x%x" % (a - 1) for a in addrs],
                         capture_output=True, text=True).stdout.splitlines()
    return {a: out[2 * i] for i, a in enumerate(addrs) if 2 * i < len(out)}


def check_bpftrace(base, truth, storm, binary):
    text = read(base + ".bt")
    if not text:
        return False, "no bpftrace output"
    stacks = {}
    for name, body, value in re.findall(r"@(live_blocks|live_bytes)\[\n(.*?)\]: (-?\d+)", text, re.S):
        key = tuple(int(a, 16) for a in re.findall(r"0x[0-9a-f]+", body))
        stacks.setdefault(key, {})[name] = int(value)
    addrs = sorted({a for k in stacks for a in k if a < 0x10000000})
    names = symbolize(binary, addrs)
    blocks = nbytes = all_blocks = all_bytes = 0
    for key, v in stacks.items():
        b, n = v.get("live_blocks", 0), v.get("live_bytes", 0)
        all_blocks += b
        all_bytes += n
        if any(names.get(a) == truth["fn"] for a in key):
            blocks += b
            nbytes += n
    ok = blocks == truth["blocks"] and nbytes == truth["bytes"]
    msg = "%d blocks, %d B under %s" % (blocks, nbytes, truth["fn"])
    if not ok:
        msg += " (all stacks: %d blocks, %d B outstanding)" % (all_blocks, all_bytes)
    return ok, msg


# ------------------------------------------------------------------ collection

def runs(storm, tool):
    out = []
    for wall in sorted(glob.glob(os.path.join(RAW, "%s.%s.*.wall" % (storm, tool)))):
        base = wall[: -len(".wall")]
        rep = int(base.rsplit(".", 1)[1])
        s = summary(read(base + ".err"))
        if s is None:
            out.append({"rep": rep, "failed": True, "base": base})
            continue
        t = gnu_time(read(base + ".time"))
        r = {
            "rep": rep, "base": base, "failed": False,
            "wall": int(read(wall).strip()) / 1e9,
            "storm": s["storm_ns"] / 1e9,
            "target_cpu": (s["cpu_user_us"] + s["cpu_sys_us"]) / 1e6,
            "target_sys": s["cpu_sys_us"] / 1e6,
            "total_cpu": t["user"] + t["sys"],
            "maxrss_mib": t["maxrss_kb"] / 1024,
            "target_rss_mib": s["maxrss_kb"] / 1024,
            "truth": s,
            "load": read(base + ".load").strip(),
        }
        binary = os.path.join("bin", "bench", storm + "_storm")
        if tool in ("leakscope", "sampled", "nomalloc"):
            r["exact"] = check_leakscope(base, s, storm)
        elif tool == "heaptrack":
            r["exact"] = check_heaptrack(base, s, storm)
        elif tool == "bpftrace":
            r["exact"] = check_bpftrace(base, s, storm, binary)
        out.append(r)
    return out


def kafka_section():
    """JVM throughput (run.sh phase kafka): per batch size, the median of
    the per-repetition ratios to the bare run of the same repetition."""
    by = {}
    for f in glob.glob(os.path.join(RAW, "kafka.*.err")):
        _, rec, mode, rep, _ = os.path.basename(f).split(".")
        m = re.search(r"throughput ([0-9.]+) ops/s", read(f))
        by.setdefault(int(rec), {}).setdefault(mode, {})[int(rep)] = (
            float(m.group(1)) if m else None, read(f[: -len(".err")] + ".load").strip())
    if not by:
        return None
    print("## JVM throughput (examples/java/KafkaRecovery.java --throughput-ms)\n")
    print("One operation: a gzip fetch (GZIPInputStream opened, read whole, closed: one inflate")
    print("stream) and one plain recovery read. Rate measured inside the JVM after its warm-up;")
    print("`-XX:+PreserveFramePointer`. Ratio: median over repetitions of traced / bare of the same")
    print("repetition (runs alternate).\n")
    print("| records a batch | mode | ops/s (median) | of bare (median, range) | load |\n|---|---|---|---|---|")
    out = {}
    for rec in sorted(by):
        modes = by[rec]
        bare = {r: v for r, (v, _) in modes.get("bare", {}).items() if v}
        out[rec] = {}
        for mode, label in (("bare", "bare"), ("default", "leakscope run (default JVM set: `--malloc auto` = off)"), ("mallocon", "leakscope run `--malloc on`"),
                            ("floor", "floor: the default set's probes, empty programs (`--probes-only`)")):
            vals = {r: v for r, (v, _) in modes.get(mode, {}).items() if v}
            loads = [float(l) for _, (v, l) in modes.get(mode, {}).items() if l]
            if not vals:
                continue
            ratios = [v / bare[r] for r, v in vals.items() if r in bare]
            out[rec][mode] = med(ratios) if ratios else None
            print("| %d | %s | %.0f | %s | %s |" % (rec, label, med(list(vals.values())),
                  "%.0f%% (%.0f-%.0f%%)" % (100 * med(ratios), 100 * min(ratios), 100 * max(ratios)) if ratios and mode != "bare" else "100%",
                  "%.1f-%.1f" % (min(loads), max(loads)) if loads else "-"))
    print()
    return out


REDIS_RUN = re.compile(r"^redis (\w+) (\d+) cpu_ms=(\d+) rps=(\d+) load=([\d.]+)$")
REDIS_MODES = (("bare", "bare"), ("exact", "leakscope attach, exact"), ("sampled", "leakscope attach, `--sample-bytes`"),
               ("floor", "floor, exact probes (`--probes-only`)"), ("floorsampled", "floor, sampled probes"))


def redis_section():
    """A real server (run.sh phase redis, bench/redis.sh): the server's CPU
    over a fixed redis-benchmark load per mode, medians of the rounds; per
    allocator call from bpftrace's count of the server's allocator calls."""
    runs = {}
    for line in read(os.path.join(RAW, "redis.runs")).splitlines():
        m = REDIS_RUN.match(line.strip())
        if m:
            runs.setdefault(m.group(1), []).append((int(m.group(3)), int(m.group(4)), float(m.group(5))))
    if not runs.get("bare"):
        return None
    rctx = {}
    for line in read(os.path.join(RAW, "redis.context")).split():
        if "=" in line:
            k, v = line.split("=", 1)
            rctx[k] = v
    calls, requests = int(rctx.get("redis_calls", 0) or 0), int(rctx.get("redis_requests", 0) or 0)
    bare = med([c for c, _, _ in runs["bare"]])
    print("## A real server: redis-server (%s)\n" % rctx.get("redis_allocator", "?"))
    print("Debian's redis-server on a unix socket, redis-benchmark SET and GET with 50 clients, leakscope")
    print("attached to the running server in each mode; modes rotated within each of %d rounds. *server CPU*:" % len(runs["bare"]))
    print("its utime + stime over the benchmark (10 ms ticks), median. Allocator calls: %s over %s requests" % (
        "{:,}".format(calls) if calls else "not counted (no bpftrace)", "{:,}".format(requests) if requests else "?"))
    print("(%s a request), counted by bpftrace on `%s` in a separate run.\n" % (
        "%.1f" % (calls / requests) if calls and requests else "?", rctx.get("redis_allocator_object", "?")))
    print("| mode | server CPU ms (median, range) | µs/call over bare | requests/s (median) | load |\n|---|---|---|---|---|")
    out = {}
    for mode, label in REDIS_MODES:
        rs = runs.get(mode)
        if not rs:
            continue
        cpu = med([c for c, _, _ in rs])
        per = (cpu - bare) * 1000 / calls if calls and mode != "bare" else None
        out[mode] = per
        print("| %s | %.0f (%d-%d) | %s | %.0f | %.1f-%.1f |" % (label, cpu, min(c for c, _, _ in rs), max(c for c, _, _ in rs),
              "%.2f" % per if per is not None else "-", med([r for _, r, _ in rs]), min(l for _, _, l in rs), max(l for _, _, l in rs)))
    print()
    print("A leak is not planted in redis: its rows are not checked for exactness here (the storms' are).\n")
    return out


STACKS_RUN = re.compile(r"rep \d+: ready ([\d.]+) s, memlock (\d+) MiB, hwm ready (\d+) MiB, end ([\d.]+) s, "
                        r"peak hwm (\d+) MiB, cpu ([\d.]+) s user ([\d.]+) s sys")
STACKS_REPORT = re.compile(r"report --format (\w+): ([\d.]+) s, ([\d.]+) s user, max RSS (\d+) KB")
STACKS_CFG = {"default": "default `--memory-limit` (72MiB)", "nolimit": "`--memory-limit 0`"}


def stacks_section():
    """leakscope's own memory at 1M live allocations on 100k stacks (run.sh
    phase stacks: bench/stacks.sh with --save, then leakscope report in
    each format), per --memory-limit setting. Returns the worst peaks of
    the default setting, for the targets."""
    by = {}
    for f in sorted(glob.glob(os.path.join(RAW, "stacks.*.*.txt"))):
        _, cfg, _, _ = os.path.basename(f).split(".")
        text = read(f)
        m = STACKS_RUN.search(text)
        if not m:
            continue
        r = by.setdefault(cfg, {"ready": [], "memlock": [], "hwm_ready": [], "end": [], "peak": [], "user": [], "report": {}})
        for k, v in zip(("ready", "memlock", "hwm_ready", "end", "peak", "user"), m.groups()):
            r[k].append(float(v))
        for fmt, secs, user, kb in STACKS_REPORT.findall(text):
            r["report"].setdefault(fmt, []).append((float(secs), float(user), int(kb) / 1024))
    if not by:
        return None
    print("## Memory at 1M live allocations on 100k stacks (bench/stacks.sh)\n")
    print("`leakscope run --max-sites 131072 --max-stacks 131072 --save C -- stacks_storm` (100k")
    print("stacks holding 10 blocks each), SIGTERM 3 s after the storm is ready, then `leakscope")
    print("report --format F C`; the settings alternate. Medians (range) over repetitions. *peak*:")
    print("leakscope's VmHWM, polled every 0.1 s; *tracing*: its VmHWM 3 s after ready; *end*: SIGTERM")
    print("to exit (detach, read 1M live allocations, write the capture's end and the report).\n")
    cfgs = [c for c in ("default", "nolimit") if c in by]
    print("| | " + " | ".join(STACKS_CFG[c] for c in cfgs) + " |")
    print("|---|" + "---|" * len(cfgs))

    def cell(xs, fmt):
        return (fmt + " (" + fmt + "-" + fmt + ")") % (med(xs), min(xs), max(xs)) if xs else "-"
    for key, label, fmt in (("peak", "`run` peak RSS, MiB", "%.0f"), ("hwm_ready", "`run` RSS while tracing, MiB", "%.0f"),
                            ("user", "`run` user CPU, s", "%.2f"), ("end", "`run` end, s", "%.2f"),
                            ("memlock", "BPF maps (memlock), MiB", "%.0f")):
        print("| %s | %s |" % (label, " | ".join(cell(by[c][key], fmt) for c in cfgs)))
    for fmt in ("text", "json", "html", "pprof"):
        print("| `report --format %s` peak RSS, MiB; time, s | %s |" % (fmt, " | ".join(
            "%s; %s" % (cell([x[2] for x in by[c]["report"].get(fmt, [])], "%.0f"), cell([x[0] for x in by[c]["report"].get(fmt, [])], "%.2f"))
            for c in cfgs)))
    print()
    d = by.get("default")
    if not d:
        return None
    reports = [x[2] for f in ("text", "json", "html") for x in d["report"].get(f, [])]
    pprof = [x[2] for x in d["report"].get("pprof", [])]
    return {"peak": max(d["peak"]), "report": max(reports) if reports else None, "pprof": max(pprof) if pprof else None}


def tool_label(tool, ctx):
    return LABEL.get(tool, tool).replace("%s", ctx.get("sample_bytes", "?"))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return "%.2f-%.2f" % (min(xs), max(xs)) if xs else "-"


def mem_samples(storm, tool):
    rows = []
    for line in read(os.path.join(RAW, "mem.%s.%s.samples" % (storm, tool))).splitlines():
        p = line.split()
        if len(p) == 3:
            rows.append(tuple(int(x) for x in p))
    if not rows:
        return None
    return {"bpf_mib": max(r[0] for r in rows) / 2**20, "hwm_mib": max(r[1] for r in rows) / 1024}


def fixed_costs():
    starts, ends = [], []
    for f in sorted(glob.glob(os.path.join(RAW, "fixed.*.times"))):
        p = read(f).split()
        if len(p) == 3 and all(x.isdigit() for x in p):
            t0, tt, t1 = map(int, p)
            starts.append((tt - t0) / 1e9)
            ends.append((t1 - tt) / 1e9)
    return starts, ends


def prog_stats():
    names = {}
    for line in read(os.path.join(RAW, "stats.names")).splitlines():
        p = line.split()
        if len(p) == 2:
            names[p[0]] = p[1]
    rows = []
    for line in read(os.path.join(RAW, "stats.progs")).splitlines():
        m = re.search(r"prog_id: (\d+) run_time_ns: (\d+) run_cnt: (\d+)", line)
        if m and int(m.group(3)) > 0:
            pid, ns, cnt = m.group(1), int(m.group(2)), int(m.group(3))
            rows.append((names.get(pid, "prog %s" % pid), cnt, ns))
    return rows


def gobench():
    rows = []
    for line in read(os.path.join(RAW, "gobench.txt")).splitlines():
        if line.startswith("Benchmark"):
            parts = line.split()
            metrics = {}
            for i in range(2, len(parts) - 1, 2):
                metrics[parts[i + 1]] = parts[i]
            rows.append((re.sub(r"-\d+$", "", parts[0]), metrics))
    return rows


# ------------------------------------------------------------------ output

def main():
    ctx = context()
    print("# leakscope benchmark results, %s" % ctx.get("date", "?")[:10])
    print()
    print("Produced by `make bench` (bench/run.sh, bench/report.py); method and analysis in")
    print("[docs/performance.md](../docs/performance.md). Raw outputs: `%s`." % RAW)
    print()
    print("| | |\n|---|---|")
    for k, label in (("date", "date (UTC)"), ("kernel", "kernel"), ("cpus", "CPUs"), ("cpu", "CPU"), ("mem_mib", "memory (MiB)"),
                     ("commit", "leakscope commit"), ("dirty_files", "uncommitted files in the tree"), ("go", "Go"),
                     ("gcc", "gcc"), ("glibc", "glibc"), ("zlib", "zlib"), ("heaptrack", "heaptrack"), ("bpftrace", "bpftrace"),
                     ("reps", "repetitions"), ("loadavg_start", "load average at start"), ("loadavg_end", "load average at end")):
        if k in ctx:
            print("| %s | %s |" % (label, ctx[k]))
    print()
    for f in sorted(glob.glob(os.path.join(RAW, "skip.*"))):
        print("- **%s skipped**: %s" % (f.rsplit(".", 1)[1], read(f).strip()))
    for line in read(os.path.join(RAW, "notes.txt")).splitlines():
        if not line.startswith("skip "):
            print("- note: %s" % line)
    print()

    print("## Storms\n")
    print("Medians of %s repetitions, tools alternated within each repetition. *wall*: the whole" % ctx.get("reps", "?"))
    print("command, tool start-up and tear-down included. *storm*: the workload's own time (it")
    print("measures itself). Slowdowns are the **median of per-repetition ratios** to the bare run of")
    print("the same repetition. *slowdown (CPU)*: the target's CPU time over the bare run's (ratio of")
    print("medians): it barely moves with the machine's load, where wall and storm times do, and for")
    print("these CPU-bound storms it is what the storm slowdown is on an idle machine.")
    print("*µs/call (storm)*: (storm time − bare storm time) / allocator calls;")
    print("*µs/call (CPU)*: (target CPU − bare CPU) / allocator calls, where target CPU is the storm")
    print("process's own user+sys time, which includes the kernel's time in probes its threads hit.")
    print("*tool CPU*: CPU of the whole command minus the target's own. *peak RSS*: the largest")
    print("process of the command (GNU time). *BPF maps*: memlock of the tool's map fds, the number")
    print("`bpftool map show` prints, sampled in a separate untimed run. *known leak*: whether the")
    print("tool's report attributes exactly the storm's known leak to its function, in every run.\n")

    targets = {}
    for storm in ("alloc", "zlib"):
        bare = {r["rep"]: r for r in runs(storm, "bare") if not r["failed"]}
        if not bare:
            continue
        calls = next(iter(bare.values()))["truth"]["calls"]
        print("### %s\n" % STORMS[storm]["title"])
        print("Allocator calls per run: %d.\n" % calls)
        loads = [float(r["load"]) for t in TOOLS for r in runs(storm, t) if not r["failed"] and r["load"]]
        if loads:
            print("1-minute load average at the start of the runs: median %.1f (%.1f-%.1f) on %s CPUs.\n" % (
                med(loads), min(loads), max(loads), ctx.get("cpus", "?")))
        print("| tool | wall s | slowdown (wall) | storm s | slowdown (storm) | slowdown (CPU) | µs/call (storm) | µs/call (CPU) | target CPU s | tool CPU s | peak RSS MiB | BPF maps MiB | known leak reported exactly |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for tool in TOOLS:
            rs = runs(storm, tool)
            ok = [r for r in rs if not r["failed"]]
            if not rs:
                continue
            if not ok:
                print("| %s | failed in every run | | | | | | | | | | | |" % tool_label(tool, ctx))
                continue
            wall_ratio = [r["wall"] / bare[r["rep"]]["wall"] for r in ok if r["rep"] in bare]
            storm_ratio = [r["storm"] / bare[r["rep"]]["storm"] for r in ok if r["rep"] in bare]
            bare_storm = med([b["storm"] for b in bare.values()])
            bare_cpu = med([b["target_cpu"] for b in bare.values()])
            us_storm = (med([r["storm"] for r in ok]) - bare_storm) * 1e6 / calls
            us_cpu = (med([r["target_cpu"] for r in ok]) - bare_cpu) * 1e6 / calls
            tool_cpu = med([r["total_cpu"] - r["target_cpu"] for r in ok])
            mem = mem_samples(storm, tool)
            bpf = "%.1f" % mem["bpf_mib"] if mem and mem["bpf_mib"] > 0 else "-"
            rss = "%.1f" % med([r["maxrss_mib"] for r in ok])
            if tool == "leakscope" and mem:
                rss += " (own %.1f)" % mem["hwm_mib"]
            if tool == "bare":
                exact = "- (ground truth)"
            elif tool in ("floor", "floorsampled"):
                exact = "- (probes only: nothing counted)"
            elif tool == "sampled":
                exact = "estimates, not exact; last run: %s" % ok[-1]["exact"][1]
            else:
                good = [r for r in ok if r["exact"][0]]
                exact = "%s %d/%d: %s" % ("yes" if len(good) == len(rs) else "**no**", len(good), len(rs), ok[-1]["exact"][1])
            if len(ok) < len(rs):
                exact += " (%d run(s) failed)" % (len(rs) - len(ok))
            sl_w = "%.1f× (%s)" % (med(wall_ratio), spread(wall_ratio)) if tool != "bare" else "1"
            sl_s = "%.1f× (%s)" % (med(storm_ratio), spread(storm_ratio)) if tool != "bare" else "1"
            cpu_ratio = med([r["target_cpu"] for r in ok]) / bare_cpu
            sl_c = "%.1f×" % cpu_ratio if tool != "bare" else "1"
            print("| %s | %.2f | %s | %.3f | %s | %s | %s | %s | %.2f | %s | %s | %s | %s |" % (
                tool_label(tool, ctx), med([r["wall"] for r in ok]), sl_w, med([r["storm"] for r in ok]), sl_s, sl_c,
                "%.2f" % us_storm if tool != "bare" else "-", "%.2f" % us_cpu if tool != "bare" else "-",
                med([r["target_cpu"] for r in ok]), "%.2f" % tool_cpu if tool != "bare" else "-", rss, bpf, exact))
            targets[(storm, tool)] = {"wall": med(wall_ratio) if wall_ratio else None, "storm": med(storm_ratio) if storm_ratio else None,
                                      "cpu": cpu_ratio, "us_cpu": us_cpu if tool != "bare" else None,
                                      "rss": mem["hwm_mib"] if mem else None}
        if not runs(storm, "sampled"):
            print("| leakscope, sampled | not run | | | | | | | | | | | |")
        print()

    stacks = stacks_section()
    if stacks:
        targets["stacks"] = stacks

    kafka = kafka_section()
    if kafka:
        targets["kafka"] = kafka

    redis = redis_section()
    if redis:
        targets["redis"] = redis

    starts, ends = fixed_costs()
    if starts:
        print("## leakscope fixed costs\n")
        print("`leakscope run -- /bin/date +%s%N`, 3 runs: start-up (leakscope started → target ran)")
        print("median %.2f s (%s); tear-down (target ran → leakscope exited) median %.2f s (%s)." % (
            med(starts), spread(starts), med(ends), spread(ends)))
        print("Both are in every *wall* number above and in no *storm* number.\n")

    ps = prog_stats()
    if ps:
        print("## Time inside leakscope's BPF programs\n")
        print("alloc storm on 1 thread, one run with `kernel.bpf_stats_enabled=1` (which itself adds")
        print("a little per run). Program time only: the uprobe/uretprobe trap and return costs come on")
        print("top (docs/performance.md).\n")
        print("| program | runs | mean ns/run |\n|---|---|---|")
        for name, cnt, ns in sorted(ps, key=lambda r: -r[1]):
            print("| %s | %d | %.0f |" % (name, cnt, ns / cnt))
        print()

    pt = read(os.path.join(RAW, "progtime.txt"))
    if "# medians" in pt:
        print("## BPF program time per run (bench/progtime.sh)\n")
        print("alloc storm under `leakscope run` with `kernel.bpf_stats_enabled=1`, 1 and 2 storm threads;")
        print("medians of the repetitions (builds alternated when two). A pair is a malloc (two")
        print("`alloc_session` runs, entry and return) and a free.\n")
        print("| build | storm threads | alloc_session ns/run | free ns/run | ns per pair | repetitions |\n|---|---|---|---|---|---|")
        for line in pt.split("# medians", 1)[1].splitlines()[1:]:
            p = line.split()
            if len(p) == 6:
                print("| %s | %s | %s | %s | %s | %s |" % (p[0], p[1], p[2], p[3], p[4], p[5].strip("()")))
        print()

    gb = gobench()
    if gb:
        print("## Go benchmarks (user space)\n")
        print("| benchmark | ns/op | ms/op | B/op | allocs/op | other |\n|---|---|---|---|---|---|")
        for name, m in gb:
            other = ", ".join("%s %s" % (v, k) for k, v in m.items() if k not in ("ns/op", "B/op", "allocs/op"))
            ns = float(m.get("ns/op", "nan"))
            print("| %s | %s | %.1f | %s | %s | %s |" % (name, m.get("ns/op", "-"), ns / 1e6, m.get("B/op", "-"), m.get("allocs/op", "-"), other))
        print()
        targets["gobench"] = {n: m for n, m in gb}

    print("## Targets from the issue\n")
    print("| target | measured | met? |\n|---|---|---|")

    def row(name, value, limit, unit="×", fmt="%.1f"):
        if value is None:
            print("| %s | not measured | - |" % name)
            return
        print("| %s | %s%s | %s |" % (name, fmt % value, unit, "met" if value <= limit else "**not met**"))

    def floor_row(storm, tool):
        """The floor under a target: the same probes with empty programs,
        measured in the same run; what leakscope's programs add on top."""
        f, t = targets.get((storm, FLOOR[tool]), {}), targets.get((storm, tool), {})
        if f.get("cpu") is None:
            return
        extra = ""
        if t.get("us_cpu") is not None and f.get("us_cpu") is not None:
            extra = "; leakscope's programs add %.2f µs/call on top (%.2f against %.2f)" % (
                t["us_cpu"] - f["us_cpu"], t["us_cpu"], f["us_cpu"])
        print("|   floor: the same probes, empty programs (CPU) | %.1f× (%.2f µs/call)%s | no program goes below it |" % (
            f["cpu"], f["us_cpu"], extra))

    def program_row(name, tool, floor, limit):
        """The programs' own cost per call over the floor's (traps), as a
        fraction of the floor: what leakscope's code adds to the traps."""
        if tool is None or floor is None or floor <= 0:
            print("| %s | not measured | - |" % name)
            return
        frac = (tool - floor) / floor
        print("| %s | %.0f%% (%.2f µs/call on a %.2f µs floor) | %s |" % (
            name, 100 * frac, tool - floor, floor, "met" if frac <= limit else "**not met**"))

    def us(storm, tool):
        return targets.get((storm, tool), {}).get("us_cpu")

    program_row("alloc storm: exact-mode program time ≤ 25% of the trap floor", us("alloc", "leakscope"), us("alloc", "floor"), 0.25)
    program_row("alloc storm: sampled ≤ 1.1× its floor", us("alloc", "sampled"), us("alloc", "floorsampled"), 0.10)
    program_row("zlib storm: sampled ≤ 1.1× its floor", us("zlib", "sampled"), us("zlib", "floorsampled"), 0.10)
    if us("zlib", "sampled") is not None and us("zlib", "leakscope") is not None:
        print("| zlib storm: sampled never above exact | %.2f against %.2f µs/call | %s |" % (
            us("zlib", "sampled"), us("zlib", "leakscope"), "met" if us("zlib", "sampled") <= us("zlib", "leakscope") else "**not met**"))
    rd = targets.get("redis") or {}
    if rd:
        program_row("redis: exact-mode program time ≤ 25% of the trap floor", rd.get("exact"), rd.get("floor"), 0.25)
        program_row("redis: sampled ≤ 1.1× its floor", rd.get("sampled"), rd.get("floorsampled"), 0.10)
    a = targets.get(("alloc", "leakscope"), {})
    row("alloc storm, exact mode ≤ 15× (CPU)", a.get("cpu"), 15)
    floor_row("alloc", "leakscope")
    row("alloc storm, exact mode ≤ 15× (storm time)", a.get("storm"), 15)
    row("alloc storm, exact mode ≤ 15× (wall, with start-up and tear-down)", a.get("wall"), 15)
    sa = targets.get(("alloc", "sampled"), {})
    row("alloc storm, sampled ≤ 10× (CPU, --sample-bytes %s)" % ctx.get("sample_bytes", "?"), sa.get("cpu"), 10)
    floor_row("alloc", "sampled")
    row("alloc storm, sampled ≤ 10× (storm time)", sa.get("storm"), 10)
    z = targets.get(("zlib", "leakscope"), {})
    row("zlib storm ≤ 1.5× (CPU)", z.get("cpu"), 1.5)
    floor_row("zlib", "leakscope")
    row("zlib storm ≤ 1.5× (storm time)", z.get("storm"), 1.5)
    row("zlib storm ≤ 1.5× (wall)", z.get("wall"), 1.5)
    zn = targets.get(("zlib", "nomalloc"), {})
    row("zlib storm ≤ 1.5× with `--malloc off` (CPU)", zn.get("cpu"), 1.5)
    row("zlib storm ≤ 1.5× with `--malloc off` (storm time)", zn.get("storm"), 1.5)
    for rec, k in sorted(targets.get("kafka", {}).items()):
        if k.get("default") is not None:
            print("| JVM Kafka repro (%s records a batch), default JVM probe set: throughput ≥ 90%% of bare | %.0f%% | %s |" % (
                rec, 100 * k["default"], "met" if k["default"] >= 0.9 else "**not met**"))
        if k.get("floor") is not None:
            print("|   floor: the same probes, empty programs | %.0f%% | no program goes above it |" % (100 * k["floor"]))
    g = targets.get("gobench", {})
    snap = g.get("BenchmarkSnapshot")
    if snap:
        row("snapshot of 1M allocations / 100k stacks < 100 ms (periodic Snapshot)", float(snap["ns/op"]) / 1e6, 100, " ms", "%.0f")
        row("  first Snapshot (reads and resolves the 100k new stacks)", float(snap.get("first-ms", "nan")), 100, " ms", "%.0f")
        row("  Stop (detach, read 1M live allocations, build the capture)", float(snap.get("stop-ms", "nan")), 100, " ms", "%.0f")
    else:
        row("snapshot of 1M allocations / 100k stacks < 100 ms", None, 0)
    rss = [v["rss"] for k, v in targets.items() if isinstance(k, tuple) and k[1] == "leakscope" and v.get("rss")]
    row("tool RSS < 100 MiB (leakscope's own VmHWM, max over storms)", max(rss) if rss else None, 100, " MiB")
    st = targets.get("stacks", {})
    row("tool RSS < 100 MiB at 1M allocations / 100k stacks (`run --save`, peak VmHWM, worst repetition)", st.get("peak"), 100, " MiB", "%.0f")
    row("  `leakscope report` of that capture, text / json / html (worst)", st.get("report"), 100, " MiB", "%.0f")
    row("  `leakscope report --format pprof` of it (worst)", st.get("pprof"), 100, " MiB", "%.0f")
    read_ms = g.get("BenchmarkCaptureFile/read/sites=100k/live=1M/snapshots=10")
    rank = g.get("BenchmarkRank/sites=100k/live=1M/snapshots=10/top=10")
    text = g.get("BenchmarkRender/text/sites=100k/top=10")
    if read_ms and rank and text:
        total = (float(read_ms["ns/op"]) + float(rank["ns/op"]) + float(text["ns/op"])) / 1e9
        row("100k-stack report < 2 s (read capture + rank + text, 10 snapshots, top 10)", total, 2, " s", "%.2f")
    rank60 = g.get("BenchmarkRank/sites=100k/live=1M/snapshots=60/top=10")
    if rank60:
        row("  rank alone, 60 snapshots (a one-minute capture)", float(rank60["ns/op"]) / 1e9, 2, " s", "%.2f")
    for fmt in ("text", "json"):
        r = g.get("BenchmarkRender/%s/sites=100k/top=0" % fmt)
        if r:
            row("  %s report of all 100k leaks (--top 0), render only" % fmt, float(r["ns/op"]) / 1e9, 2, " s", "%.2f")
    r = g.get("BenchmarkRender/pprof/sites=100k")
    if r:
        row("  pprof of 100k sites, render only", float(r["ns/op"]) / 1e9, 2, " s", "%.2f")
    print()


main()

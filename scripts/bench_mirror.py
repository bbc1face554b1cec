#!/usr/bin/env python3
"""Mirroring's cost to the client (issue 26): the p99 of `redis-benchmark -t set` through
slotgate in front of a three-server sharded pool, without and with `[mirror]` copying a
share of the writes to a two-server pool, in the same run, alternated; and whether the
mirror counters match what arrived (the mirror servers' own SET counts).

It reuses bench_core.py's set-up (load generator and backends on CPU0, the proxy alone on
CPU1). Both proxies run at once over the same primary servers; only one is loaded at a time.

Usage: python3 scripts/bench_mirror.py [--reps 5] [--requests 200000] [--percent 10]
                                       [--slotgate BIN]
"""

import argparse
import csv
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402
from slotgate_tools.resp import Conn  # noqa: E402


def start_proxy(procs, binary, name, primaries, mirrors, percent):
    port = bc.free_port()
    conf = os.path.join(procs.workdir, f"{name}.toml")
    with open(conf, "w") as f:
        f.write(f'[proxy]\nlisten = "127.0.0.1:{port}"\nthreads = 1\n')
        f.write("[sharded]\nservers = [" +
                ", ".join(f'"127.0.0.1:{p}:1"' for p, _ in primaries) + "]\n")
        if mirrors:
            f.write(f'[mirror]\npercent = {percent}\ncommands = "writes"\n[mirror.pool]\n')
            f.write("servers = [" + ", ".join(f'"127.0.0.1:{p}:1"' for p, _ in mirrors) + "]\n")
    proc = procs.start(name, [binary, "proxy", "--config", conf], cpu=bc.SUT_CPU,
                       env=dict(os.environ, RUST_LOG="warn"))
    bc.wait_ready(port, proc, name)
    return port


def p99_of(port, requests):
    out = subprocess.run(
        ["taskset", "-c", str(bc.LOADGEN_CPU), "redis-benchmark", "-p", str(port), "-t", "set",
         "-n", str(requests), "-c", "50", "-r", "100000", "-d", "64", "--csv"],
        capture_output=True, text=True, timeout=600, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return float(rows[0]["p99_latency_ms"]), float(rows[0]["rps"])


def info_stats(port):
    c = Conn(port)
    text = c.call("INFO", "stats")
    c.close()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def set_calls(port):
    c = Conn(port)
    text = c.call("INFO", "commandstats")
    c.close()
    for line in text.splitlines():
        if line.startswith("cmdstat_set:calls="):
            return int(line.split("=", 1)[1].split(",", 1)[0])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--percent", type=int, default=10)
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    args = ap.parse_args()
    os.sched_setaffinity(0, {bc.LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="bench-mirror-")
    procs = bc.Processes(workdir)
    p99 = {"plain": [], "mirror": []}
    rps = {"plain": [], "mirror": []}
    try:
        primaries = [bc.start_redis(procs, f"primary-{i}") for i in range(3)]
        mirrors = [bc.start_redis(procs, f"mirror-{i}") for i in range(2)]
        ports = {
            "plain": start_proxy(procs, args.slotgate, "plain", primaries, [], 0),
            "mirror": start_proxy(procs, args.slotgate, "mirror", primaries, mirrors,
                                  args.percent),
        }
        p99_of(ports["plain"], args.requests // 4)  # warm-up, both
        p99_of(ports["mirror"], args.requests // 4)
        for rep in range(args.reps):
            order = ["plain", "mirror"] if rep % 2 == 0 else ["mirror", "plain"]
            for name in order:
                p, r = p99_of(ports[name], args.requests)
                p99[name].append(p)
                rps[name].append(r)
                print(f"rep {rep + 1} {name:6} p99 {p:.3f} ms  {r:,.0f} rps", flush=True)
        stats = info_stats(ports["mirror"])
        arrived = sum(set_calls(p) for p, _ in mirrors)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.close()
    print()
    print("| system | p99 ms, median (min–max) | rps, median |")
    print("|---|---|---|")
    for name in ("plain", "mirror"):
        label = "slotgate" if name == "plain" else f"slotgate + [mirror] {args.percent}%"
        print(f"| {label} | {statistics.median(p99[name]):.3f} "
              f"({min(p99[name]):.3f}–{max(p99[name]):.3f}) | {statistics.median(rps[name]):,.0f} |")
    print()
    print(f"mirror counters: sent {stats.get('mirror_sent')}, answered "
          f"{stats.get('mirror_answered')}, dropped {stats.get('mirror_dropped')}, failed "
          f"{stats.get('mirror_failed')}; SETs the mirror servers counted: {arrived}")


if __name__ == "__main__":
    main()

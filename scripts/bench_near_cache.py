#!/usr/bin/env python3
"""The near cache's benchmark (issue 27, docs/hotkeys.md): a Zipf(0.99) GET/SET 95/5
workload over 1,000,000 keys on a 3-master, 1-replica cluster, driven by `slotgate bench
run`, in the same run against

  direct     the cluster itself (the generator routes by slot, as a cluster client does),
  slotgate   the proxy without the cache,
  cached     the same proxy binary with `[near_cache]` on, automatic policy (keys read at
             least --auto-rate times a second),
  cached-all the same with `patterns = ["key:*"]`: every key cached from its first read,

alternated round by round. For each: requests/s, p99, the CPU per request of the proxy and
of each master (on-CPU time of every thread from /proc/<pid>/task/*/schedstat, before and
after), and the GETs that reached the masters (their `cmdstat_get` calls, and the cache's
fills, `cmdstat_getrange`).

Placement as bench_core.py: the generator and every redis-server on CPU0, the proxy alone
on CPU1; both proxies run at once over the same cluster, only one is loaded at a time.

Usage: python3 scripts/bench_near_cache.py [--reps 3] [--seconds 15] [--slotgate BIN]
                                           [--auto-rate 50] [--rate R] [--out results/near-cache]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402

KEYS = 1_000_000
MIX = "get:95,set:5"
DIST = "zipf:0.99"


def cluster_up(procs, binary):
    cdir = os.path.join(procs.workdir, "cluster")
    base = bc.free_cluster_base(6)
    procs.on_close(subprocess.run, [binary, "cluster", "down", "--dir", cdir],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    up = subprocess.run(["taskset", "-c", str(bc.LOADGEN_CPU), binary, "cluster", "up",
                         "--masters", "3", "--replicas", "1", "--port", str(base),
                         "--dir", cdir], capture_output=True, text=True, timeout=180,
                        start_new_session=True)
    if up.returncode != 0:
        raise bc.BenchError(f"cluster up failed: {up.stderr or up.stdout}")
    seed = re.search(r"^seed:\s*(\S+)", up.stdout, re.M).group(1)
    masters = re.search(r"^masters:\s*(.+)$", up.stdout, re.M).group(1).split()
    ports = [int(a.rsplit(":", 1)[1]) for a in masters]
    return seed, ports


def start_proxy(procs, binary, name, seed, cache, auto_rate, patterns=()):
    port = bc.free_port()
    conf = os.path.join(procs.workdir, f"{name}.toml")
    with open(conf, "w") as f:
        f.write(f'[proxy]\nlisten = "127.0.0.1:{port}"\nthreads = 1\n'
                f'[cluster]\nseeds = ["{seed}"]\n'
                '[limits]\nmemory_budget_bytes = 1073741824\n')
        if cache:
            f.write(f"[near_cache]\nenabled = true\nauto_reads_per_second = {auto_rate}\n"
                    "max_bytes = 268435456\npatterns = ["
                    + ", ".join(f'"{p}"' for p in patterns) + "]\n")
    proc = procs.start(name, [binary, "proxy", "--config", conf], cpu=bc.SUT_CPU,
                       env=dict(os.environ, RUST_LOG="warn"))
    bc.wait_ready(port, proc, name)
    return port, proc


def master_calls(ports):
    out = {"get": 0, "getrange": 0, "set": 0}
    for port in ports:
        info = bc.resp_call(port, "INFO", "commandstats")
        for name in out:
            m = re.search(rf"^cmdstat_{name}:calls=(\d+)", info, re.M)
            out[name] += int(m.group(1)) if m else 0
    return out


def load(binary, endpoint, seconds, seed, rate=None):
    """`slotgate bench run` for `seconds` against `endpoint` (its --target or --cluster
    arguments); its JSON report."""
    argv = ["taskset", "-c", str(bc.LOADGEN_CPU), binary, "bench", "run", "--clients", "50",
            "--duration", f"{seconds}s", "--keyspace", str(KEYS), "--key-dist", DIST,
            "--mix", MIX, "--value-size", "64", "--seed", str(seed), "--json"]
    argv += endpoint
    if rate:
        # Open loop: the same offered load for every system, so a master's CPU per request
        # is not set by how fast a closed loop happens to spin.
        argv += ["--rate", str(rate), "--pipeline", "16"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds * 4 + 60)
    if out.returncode != 0:
        raise bc.BenchError(f"bench run failed: {out.stderr[-800:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    ap.add_argument("--auto-rate", type=int, default=50,
                    help="near_cache.auto_reads_per_second of the cached proxy")
    ap.add_argument("--rate", type=int, default=None,
                    help="open loop at this many requests/s in total (default: closed loop)")
    ap.add_argument("--out", default=None, help="write the table and raw rows here")
    args = ap.parse_args()
    binary = args.slotgate
    procs = bc.Processes(tempfile.mkdtemp(prefix="bench-near-cache-"))
    try:
        seed, mports = cluster_up(procs, binary)
        mpids = [bc.redis_pid(p) for p in mports]
        plain_port, plain = start_proxy(procs, binary, "slotgate", seed, False, 0)
        cached_port, cached = start_proxy(procs, binary, "cached", seed, True, args.auto_rate)
        all_port, all_keys = start_proxy(procs, binary, "cached-all", seed, True, 0, ["key:*"])
        print(f"cluster {seed} masters {mports}; prepopulating {KEYS:,} keys", flush=True)
        subprocess.run(["taskset", "-c", str(bc.LOADGEN_CPU), binary, "bench", "run",
                        "--cluster", seed, "--keyspace", str(KEYS), "--prepopulate",
                        "--requests", "1", "--clients", "50", "--value-size", "64"],
                       check=True, capture_output=True, timeout=600)
        systems = {
            "direct": (["--cluster", seed], None),
            "slotgate": (["--target", f"127.0.0.1:{plain_port}"], plain.pid),
            "cached": (["--target", f"127.0.0.1:{cached_port}"], cached.pid),
            "cached-all": (["--target", f"127.0.0.1:{all_port}"], all_keys.pid),
        }
        # One warm-up round, not counted: the cached proxy learns its hot keys.
        for endpoint, _ in systems.values():
            load(binary, endpoint, 5, 99)
        rows = []
        order = list(systems)
        for rep in range(args.reps):
            for name in order[rep % len(order):] + order[:rep % len(order)]:
                endpoint, pid = systems[name]
                calls0 = master_calls(mports)
                m0 = [bc.schedstat_ns(p) for p in mpids]
                p0 = bc.schedstat_ns(pid) if pid else 0
                run = load(binary, endpoint, args.seconds, rep + 1, args.rate)
                p1 = bc.schedstat_ns(pid) if pid else 0
                m1 = [bc.schedstat_ns(p) for p in mpids]
                calls1 = master_calls(mports)
                n = run["requests"]
                masters_us = [(b - a) / 1e3 / n for a, b in zip(m0, m1, strict=True)]
                row = {
                    "system": name, "rep": rep, "requests": n,
                    "rps": run["throughput_rps"], "p99_us": run["p99_us"],
                    "errors": run["errors"]["total"],
                    "proxy_us": (p1 - p0) / 1e3 / n,
                    "masters_us": masters_us,
                    "gets_at_masters": calls1["get"] - calls0["get"],
                    "fills": calls1["getrange"] - calls0["getrange"],
                    "gets_sent": round(n * 0.95),
                }
                rows.append(row)
                print(f"{name:9} rep {rep}: {row['rps']:9.0f} rps, p99 {row['p99_us']:7.0f} µs,"
                      f" proxy {row['proxy_us']:.2f} µs/req, masters "
                      + "/".join(f"{x:.2f}" for x in masters_us)
                      + f" µs/req, GETs at masters {row['gets_at_masters']:,}"
                      f" (+{row['fills']:,} fills) of ~{row['gets_sent']:,}", flush=True)
        hits = {}
        for name, port in (("cached", cached_port), ("cached-all", all_port)):
            info = bc.resp_call(port, "INFO", "stats")
            hits[name] = " ".join(x.strip() for x in info.splitlines()
                                  if x.startswith("near_cache_"))
        table = summarize(rows, hits)
        print(table)
        if args.out:
            os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
            with open(args.out + ".txt", "w") as f:
                f.write(table + "\n")
            with open(args.out + ".json", "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        procs.close()


def summarize(rows, hits):
    med = statistics.median
    lines = ["| system | requests/s | p99 µs | proxy µs/req | hottest master µs/req |"
             " masters µs/req (sum) | total µs/req | GETs reaching masters |",
             "|---|---|---|---|---|---|---|---|"]
    for name in ("direct", "slotgate", "cached", "cached-all"):
        rs = [r for r in rows if r["system"] == name]
        hottest = med(max(r["masters_us"]) for r in rs)
        masters = med(sum(r["masters_us"]) for r in rs)
        proxy = med(r["proxy_us"] for r in rs)
        share = med(r["gets_at_masters"] / r["gets_sent"] for r in rs)
        fills = med(r["fills"] / r["gets_sent"] for r in rs)
        lines.append(f"| {name} | {med(r['rps'] for r in rs):,.0f} | {med(r['p99_us'] for r in rs):,.0f}"
                     f" | {proxy:.2f} | {hottest:.2f} | {masters:.2f} | {proxy + masters:.2f}"
                     f" | {share:.1%} (+{fills:.1%} fills) |")
    lines.append("")
    for name, counters in hits.items():
        lines.append(f"{name} at the end: {counters}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A pool moved into a cluster under load (issue 26's acceptance, docs/migration.md).

1,000,000 keys on a three-server ketama pool (nutcracker's defaults, hash tag `{}`) move
into a three-master, one-replica-each cluster through one slotgate with `[migration]`,
while 50 clients run INCR, SET, HSET and LPUSH at a fixed total rate (20,000/s by
default). Measured and checked:

- the load's p50/p99 before the move (through slotgate in front of the pool, as served
  before a migration) and during the copy (through the migrating slotgate), and the copy's
  rate (keys moved per second, from INFO migration);
- Jepsen-style, after cut-over: every counter equals its acknowledged INCRs, every string
  and hash field its last acknowledged write, every list its initial length plus its
  acknowledged LPUSHes, TTLs within a second of the source's, types' contents (sets, sorted
  sets, streams), one big key (100 MB by default) byte-sampled; 0 client errors; the
  source empty.

Each client owns its share of the strings, hashes and lists (index % clients), so "last
acknowledged" is one client's; counters are shared.

Processes: the load (`slotgate bench acked`) and the nine servers on CPU0 (`--servers-cpus`),
the proxy (with its copier) on CPU1, as bench_core.py pins them.

Usage: python3 scripts/bench_migration.py [--keys 1000000] [--rate 20000] [--clients 50]
           [--copy-rate 20000] [--before 20] [--after 20] [--big-mb 100] [--dump-max-mb N] [--slotgate BIN]
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402
from slotgate_tools.resp import Conn, RespError  # noqa: E402

COUNTERS = 10_000
FAMILY = 10_000  # strings, hashes, lists, sets, sorted sets, streams, TTL keys: each
TTL_MS = 3_600_000


def fill(port, keys, big_mb):
    """The source's data, written through `port` (slotgate in front of the pool). Returns
    the window in which the TTL keys were written."""
    c = Conn(port, timeout=120)
    batch = []

    def flush():
        for r in c.pipeline(*batch):
            if isinstance(r, RespError):
                raise bc.BenchError(f"fill: {r}")
        batch.clear()

    def add(*cmd):
        batch.append(cmd)
        if len(batch) >= 2000:
            flush()

    for i in range(COUNTERS):
        add("SET", f"c:{i}", "0")
    for i in range(FAMILY):
        add("SET", f"s:{i}", "v0")
        add("HSET", f"h:{i}", "base", "1")
        add("RPUSH", f"l:{i}", "a", "b")
        add("SADD", f"S:{i}", "m1", "m2", str(i))
        add("ZADD", f"z:{i}", "1", "a", "2.5", str(i))
        add("XADD", f"x:{i}", "*", "f", str(i))
    rest = keys - COUNTERS - 7 * FAMILY - (1 if big_mb else 0)
    value64 = "v" * 64
    for i in range(max(rest, 0)):
        add("SET", f"k:{i}", value64)
    flush()
    if big_mb:
        big = (b"0123456789abcdef" * 65536)  # 1 MiB
        c.call("SET", "big:0", "")
        for _ in range(big_mb):
            c.call("APPEND", "big:0", big)
    # The TTL keys last, timed: their PTTL after the move is checked against this window.
    ttl_from = time.monotonic()
    for i in range(FAMILY):
        add("SET", f"t:{i}", str(i), "PX", str(TTL_MS))
    flush()
    ttl_to = time.monotonic()
    c.close()
    return ttl_from, ttl_to


# ---------------------------------------------------------------------------- load


def run_load(slotgate, port, clients, rate, seconds, workdir, name, until=None):
    """`slotgate bench acked` (INCR / SET / HSET / LPUSH, each client one request in flight,
    paced to `rate` in total) for `seconds`, or until `until()` turns true: it stops
    between requests, so no outcome is left unknown. Returns its report: every acknowledged
    write, the errors, latency percentiles."""
    out = os.path.join(workdir, f"{name}.json")
    stop = out + ".stop"
    p = subprocess.Popen(["taskset", "-c", str(bc.LOADGEN_CPU), slotgate, "bench", "acked",
                          "--endpoint", f"127.0.0.1:{port}", "--clients", str(clients),
                          "--rate", str(rate), "--duration", f"{seconds}s",
                          "--counters", str(COUNTERS), "--family", str(FAMILY),
                          "--stop-file", stop, "--out", out])
    started = time.monotonic()
    if until is not None:
        while p.poll() is None and time.monotonic() - started < seconds and not until():
            time.sleep(0.5)
        open(stop, "w").close()
    if p.wait() != 0:
        raise bc.BenchError(f"bench acked ({name}) exited with {p.returncode}")
    with open(out) as f:
        return json.load(f)


# ---------------------------------------------------------------------------- checks


def info_migration(port):
    c = Conn(port)
    text = c.call("INFO", "migration")
    c.close()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def check(port, acks, big_mb, written):
    """Every acknowledged write, once; contents and TTLs; the big key. Returns problems."""
    problems = []
    c = Conn(port, timeout=120)
    incr, sets, hsets, pushes = {}, {}, {}, {}
    for a in acks:
        for k, v in a["incr"].items():
            incr[int(k)] = incr.get(int(k), 0) + v
        for k, v in a["lpush"].items():
            pushes[int(k)] = pushes.get(int(k), 0) + v
        sets.update({int(k): v for k, v in a["set"].items()})
        hsets.update(a["hset"])
    got = c.pipeline(*[("GET", f"c:{i}") for i in range(COUNTERS)])
    for i, g in enumerate(got):
        if int(g) != incr.get(i, 0):
            problems.append(f"c:{i} = {g}, acknowledged INCRs {incr.get(i, 0)}")
    got = c.pipeline(*[("GET", f"s:{i}") for i in range(FAMILY)])
    for i, g in enumerate(got):
        if g != sets.get(i, "v0"):
            problems.append(f"s:{i} = {g!r}, last acknowledged {sets.get(i, 'v0')!r}")
    keys = list(hsets)
    got = c.pipeline(*[("HGET", f"h:{k.split(':')[0]}", f"f{k.split(':')[1]}") for k in keys])
    for k, g in zip(keys, got, strict=True):
        if g != hsets[k]:
            problems.append(f"h:{k} = {g!r}, last acknowledged {hsets[k]!r}")
    got = c.pipeline(*[("LLEN", f"l:{i}") for i in range(FAMILY)])
    for i, g in enumerate(got):
        if g != 2 + pushes.get(i, 0):
            problems.append(f"l:{i} LLEN {g}, expected {2 + pushes.get(i, 0)}")
    cards = c.pipeline(*[("SCARD", f"S:{i}") for i in range(FAMILY)])
    scores = c.pipeline(*[("ZSCORE", f"z:{i}", str(i)) for i in range(FAMILY)])
    xlens = c.pipeline(*[("XLEN", f"x:{i}") for i in range(FAMILY)])
    for i in range(FAMILY):
        if cards[i] != 3 or scores[i] != "2.5" or xlens[i] != 1:
            problems.append(f"S:{i}/z:{i}/x:{i}: {cards[i]} {scores[i]} {xlens[i]}")
    # Elapsed since the write, at least and at most, when PTTL answers.
    least = (time.monotonic() - written[1]) * 1000
    ttls = c.pipeline(*[("PTTL", f"t:{i}") for i in range(FAMILY)])
    most = (time.monotonic() - written[0]) * 1000
    for i, t in enumerate(ttls):
        if not (TTL_MS - most - 1000 <= t <= TTL_MS - least + 1000):
            problems.append(f"t:{i} PTTL {t}, expected {TTL_MS - most:.0f}..{TTL_MS - least:.0f}")
    if big_mb:
        n = c.call("STRLEN", "big:0")
        if n != big_mb * 1 << 20:
            problems.append(f"big:0 STRLEN {n}")
        for at in (0, 12345, n // 2, n - 16):
            if c.call("GETRANGE", "big:0", at, at + 15) != ("0123456789abcdef" * 2)[at % 16:][:16]:
                problems.append(f"big:0 bytes at {at}")
    c.close()
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rate", type=int, default=20_000, help="requests/s, all clients")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--copy-rate", type=int, default=20_000, help="copy_keys_per_second")
    ap.add_argument("--before", type=int, default=20, help="seconds of load before")
    ap.add_argument("--after", type=int, default=20,
                    help="seconds of load after the cut-over (and the checks), on the "
                         "target through the same proxy: what the target itself costs")
    ap.add_argument("--big-mb", type=int, default=100)
    ap.add_argument("--dump-max-mb", type=int, default=None,
                    help="[migration] dump_max_bytes in MiB (default: the proxy's, 128): "
                         "keys taking more move by slices")
    ap.add_argument("--max-copy", type=int, default=1800, help="seconds the copy may take")
    ap.add_argument("--servers-cpus", default=str(bc.LOADGEN_CPU),
                    help="taskset list for the nine servers (the load is on CPU0, the proxy "
                         "on CPU1)")
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    args = ap.parse_args()
    os.sched_setaffinity(0, {bc.LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="bench-migration-")
    procs = bc.Processes(workdir)
    try:
        source = [bc.start_redis(procs, f"source{i}", args.servers_cpus) for i in range(3)]
        before_proxy = bc.start_slotgate_sharded(procs, args.slotgate, source, "before")
        t0 = time.monotonic()
        written = fill(before_proxy.port, args.keys, args.big_mb)
        print(f"filled {args.keys} keys in {time.monotonic() - t0:.1f} s", flush=True)
        before = run_load(args.slotgate, before_proxy.port, args.clients, args.rate,
                          args.before, workdir, "before")
        # The pool is served by one proxy at a time: the migrating one from now on.
        os.kill(before_proxy.sut_pid, signal.SIGTERM)
        wait_gone(before_proxy.sut_pid)

        # The target, and the migrating proxy.
        cluster_dir = os.path.join(workdir, "cluster")
        base = bc.free_cluster_base(6)
        procs.on_close(subprocess.run, [args.slotgate, "cluster", "down", "--dir", cluster_dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        up = subprocess.run(["taskset", "-c", args.servers_cpus, args.slotgate, "cluster",
                             "up", "--masters", "3", "--replicas", "1", "--port", str(base),
                             "--dir", cluster_dir], capture_output=True, text=True,
                            timeout=180, start_new_session=True)
        if up.returncode != 0:
            raise bc.BenchError(f"cluster up: {up.stderr or up.stdout}")
        seed = re.search(r"^seed:\s*(\S+)", up.stdout, re.M).group(1)
        port, admin = bc.free_port(), bc.free_port()
        conf = os.path.join(workdir, "migrating.toml")
        with open(conf, "w") as f:
            f.write(f'[proxy]\nlisten = "127.0.0.1:{port}"\nthreads = 1\n'
                    f'[cluster]\nseeds = ["{seed}"]\n'
                    f'[admin]\nlisten = "127.0.0.1:{admin}"\n'
                    f'[migration]\ncopy_keys_per_second = {args.copy_rate}\n'
                    + (f'dump_max_bytes = {args.dump_max_mb << 20}\n'
                       if args.dump_max_mb is not None else '') +
                    '[migration.source]\nhash = "fnv1a_64"\ndistribution = "ketama"\n'
                    'hash_tag = "{}"\nservers = [' +
                    ", ".join(f'"127.0.0.1:{p}:1 redis{i}"' for i, (p, _) in enumerate(source))
                    + "]\n")
        proxy = procs.start("migrating", [args.slotgate, "proxy", "--config", conf],
                            cpu=bc.SUT_CPU, env=dict(os.environ, RUST_LOG="warn"))
        bc.wait_ready(port, proxy, "migrating proxy")
        copy_started = time.monotonic()
        done = lambda: info_migration(port).get("migration_left_keys") == "0"  # noqa: E731
        during = run_load(args.slotgate, port, args.clients, args.rate, args.max_copy, workdir,
                          "during", until=done)
        copy_s = time.monotonic() - copy_started
        info = info_migration(port)
        req = urllib.request.Request(f"http://127.0.0.1:{admin}/migration/cutover",
                                     method="POST", data=b"",
                                     headers={"Content-Type": "application/json"})
        cut = urllib.request.urlopen(req, timeout=30).read().decode().strip()
        left = [bc.resp_call(p, "DBSIZE") for p, _ in source]
        problems = check(port, [before, during], args.big_mb, written)
        after = run_load(args.slotgate, port, args.clients, args.rate, args.after, workdir,
                         "after") if args.after else None
        runs = [before, during] + ([after] if after else [])
        errors = [e for r in runs for e in r["errors"]]
        error_count = sum(r["error_count"] for r in runs)
        moved = int(info["migration_keys_moved"])
        rows = [
            ("keys", args.keys), ("clients", args.clients), ("target rate /s", args.rate),
            ("load before: requests/s", f"{before['rate']:.0f}"),
            ("load before: p50 / p99 ms", f"{before['p50_ms']:.2f} / {before['p99_ms']:.2f}"),
            ("load before: p99 from due ms", f"{before['due_p99_ms']:.2f}"),
            ("load during: requests/s", f"{during['rate']:.0f}"),
            ("load during: p50 / p99 ms", f"{during['p50_ms']:.2f} / {during['p99_ms']:.2f}"),
            ("load during: p99 from due ms", f"{during['due_p99_ms']:.2f}"),
            ("p99 during ÷ before", f"{during['p99_ms'] / before['p99_ms']:.2f}"),
        ]
        if after:
            rows += [
                ("load after: requests/s", f"{after['rate']:.0f}"),
                ("load after: p50 / p99 ms", f"{after['p50_ms']:.2f} / {after['p99_ms']:.2f}"),
                ("load after: p99 from due ms", f"{after['due_p99_ms']:.2f}"),
                ("p99 after ÷ before", f"{after['p99_ms'] / before['p99_ms']:.2f}"),
                ("p99 during ÷ after", f"{during['p99_ms'] / after['p99_ms']:.2f}"),
            ]
        rows += [
            ("copy: seconds", f"{copy_s:.1f}"), ("copy: keys moved", moved),
            ("copy: keys/s", f"{moved / copy_s:.0f}"),
            ("keys moved by slices", info.get("migration_keys_sliced", "?")),
            ("requests gated", info["migration_requests_gated"]),
            ("lease waits", info["migration_lease_waits"]),
            ("move errors", info["migration_errors"]),
            ("cut-over", cut), ("source keys left", left),
            ("client errors", error_count), ("check problems", len(problems)),
        ]
        for k, v in rows:
            print(f"{k:28} {v}")
        for name, run in zip(("before", "during", "after")[:len(runs)], runs, strict=True):
            print(f"{name}, per second: requests / worst service ms / worst from due ms:")
            print("   " + "  ".join(f"{s['requests']}/{s['service_max_ms']:.0f}/"
                                   f"{s['due_max_ms']:.0f}" for s in run["seconds"]))
        for e in (errors + problems)[:20]:
            print("  ", e)
        return 0 if not error_count and not problems and sum(left) == 0 else 1
    finally:
        procs.close()


def wait_gone(pid, timeout=30.0):
    """Wait until process `pid` has exited (it is the child of another process here, so
    only its disappearance can be seen)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            pass
        time.sleep(0.1)
    raise bc.BenchError(f"process {pid} still running after {timeout:.0f}s")


if __name__ == "__main__":
    sys.exit(main())

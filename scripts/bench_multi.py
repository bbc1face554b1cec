#!/usr/bin/env python3
"""What a transaction costs when it lives on its node (`cluster.live_multi`, issue 25):
closed-loop clients each send `MULTI, SET, INCR, EXEC` pipelined in one write and wait for
the four replies, through two proxies in front of the same 3-master cluster, one with
`live_multi = true` (each command written to the node as it comes; EXEC once the QUEUEDs
are back) and one with `live_multi = false` (the commands kept by the proxy and sent with
EXEC), alternated in the same run. Reported per transaction: the proxy's CPU, the
masters' CPU, and the latency the clients saw (median and p99), and transactions/s.

It reuses bench_core.py's set-up (this load generator and the nodes on CPU0, the proxies
on CPU1, only one loaded at a time). The load generator is Python: it cannot saturate the
proxy, so compare CPU per transaction and latency, not throughput.

Usage: python3 scripts/bench_multi.py [--reps 5] [--seconds 10] [--clients 20]
                                      [--slotgate BIN]
"""

import argparse
import os
import selectors
import signal
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402


def start_batched_proxy(procs, binary, seed_port):
    """A second proxy over the same cluster, with `live_multi = false`."""
    port = bc.free_port()
    conf = os.path.join(procs.workdir, "batched.toml")
    with open(conf, "w") as f:
        f.write(f'[proxy]\nlisten = "127.0.0.1:{port}"\nthreads = 1\n')
        f.write(f'[cluster]\nseeds = ["127.0.0.1:{seed_port}"]\nlive_multi = false\n')
    proc = procs.start("batched", [binary, "proxy", "--config", conf], cpu=bc.SUT_CPU,
                       env=dict(os.environ, RUST_LOG="warn"))
    bc.wait_ready(port, proc, "batched proxy")
    return port, proc.pid


def transaction(i):
    """One client's transaction, as it writes it: four commands in one write."""
    key = f"{{c{i}}}"
    parts = [["MULTI"], ["SET", key + "k", "v" * 32], ["INCR", key + "n"], ["EXEC"]]
    out = b""
    for args in parts:
        out += f"*{len(args)}\r\n".encode()
        for a in args:
            out += f"${len(a)}\r\n{a}\r\n".encode()
    return out


def complete(buf):
    """Whether `buf` holds the four replies: +OK, +QUEUED twice, then EXEC's array, whose
    last element is INCR's integer line."""
    at = buf.find(b"*2\r\n")
    return at >= 0 and buf.endswith(b"\r\n") and buf.count(b"\r\n", at) == 3


def run_load(port, clients, seconds):
    """Closed loop for `seconds`: transactions done and each one's latency (s)."""
    sel = selectors.DefaultSelector()
    conns = []
    for i in range(clients):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        state = {"sock": s, "frame": transaction(i), "buf": b"", "sent": 0.0}
        conns.append(state)
        sel.register(s, selectors.EVENT_READ, state)
    latencies = []
    end = time.monotonic() + seconds
    for c in conns:
        c["sent"] = time.monotonic()
        c["sock"].sendall(c["frame"])
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=1.0):
            c = key.data
            data = c["sock"].recv(65536)
            if not data:
                raise RuntimeError("the proxy closed a connection")
            c["buf"] += data
            if complete(c["buf"]):
                if b"-" in c["buf"][:1] or b"\r\n-" in c["buf"]:
                    raise RuntimeError(f"error reply: {c['buf'][:200]!r}")
                now = time.monotonic()
                latencies.append(now - c["sent"])
                c["buf"] = b""
                c["sent"] = now
                c["sock"].sendall(c["frame"])
    for c in conns:
        c["sock"].close()
    sel.close()
    return latencies


def measure(port, pid, master_pids, clients, seconds):
    proxy0 = bc.schedstat_ns(pid)
    nodes0 = sum(bc.schedstat_ns(p) for p in master_pids)
    lat = run_load(port, clients, seconds)
    proxy = bc.schedstat_ns(pid) - proxy0
    nodes = sum(bc.schedstat_ns(p) for p in master_pids) - nodes0
    n = len(lat)
    lat.sort()
    return {
        "tps": n / seconds,
        "proxy_us": proxy / n / 1000,
        "nodes_us": nodes / n / 1000,
        "p50_ms": lat[n // 2] * 1000,
        "p99_ms": lat[int(n * 0.99)] * 1000,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    args = ap.parse_args()
    os.sched_setaffinity(0, {bc.LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="bench-multi-")
    procs = bc.Processes(workdir)
    runs = {"live": [], "batched": []}
    try:
        live = bc.start_slotgate(procs, args.slotgate)
        batched_port, batched_pid = start_batched_proxy(procs, args.slotgate,
                                                        live.served_ports[0])
        systems = {"live": (live.port, live.sut_pid), "batched": (batched_port, batched_pid)}
        for port, pid in systems.values():  # warm-up
            measure(port, pid, live.backend_pids, args.clients, 2)
        for rep in range(args.reps):
            order = ["live", "batched"] if rep % 2 == 0 else ["batched", "live"]
            for name in order:
                port, pid = systems[name]
                r = measure(port, pid, live.backend_pids, args.clients, args.seconds)
                runs[name].append(r)
                print(f"rep {rep + 1} {name:7} {r['tps']:8,.0f} tx/s  proxy "
                      f"{r['proxy_us']:6.2f} µs/tx  masters {r['nodes_us']:6.2f} µs/tx  "
                      f"p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.close()
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
    print()
    print("| live_multi | tx/s | proxy µs/tx | masters µs/tx | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for name in ("live", "batched"):
        m = med[name]
        label = "true (live)" if name == "live" else "false (batched)"
        print(f"| {label} | {m['tps']:,.0f} | {m['proxy_us']:.2f} | {m['nodes_us']:.2f} | "
              f"{m['p50_ms']:.3f} | {m['p99_ms']:.3f} |")
    ratio = {k: med["live"][k] / med["batched"][k] for k in med["live"]}
    print(f"| live ÷ batched | {ratio['tps']:.3f} | {ratio['proxy_us']:.3f} | "
          f"{ratio['nodes_us']:.3f} | {ratio['p50_ms']:.3f} | {ratio['p99_ms']:.3f} |")
    print(f"\nmedians of {args.reps} runs of {args.seconds:g} s, {args.clients} clients")


if __name__ == "__main__":
    main()

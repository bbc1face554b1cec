#!/usr/bin/env python3
"""The proxy's own CPU per CLUSTER SLOTS with 3 and with 100 masters behind it: the reply is
pre-encoded, so it must not grow with the map (BENCHMARKS.md). The proxy is pinned to CPU1
with one worker, the load (`slotgate bench run`, 10 clients, 20,000 requests) to CPU0; three
reps per size. Needs target/release/slotgate.

    python3 scripts/cluster_slots_cost.py [--requests 20000] [--reps 3]
"""
import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

from slotgate_tools.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOTGATE = os.path.join(ROOT, "target", "release", "slotgate")


def cpu_ns(pid):
    """CPU time of every thread of `pid` so far (schedstat), in ns."""
    return sum(int(open(t + "/schedstat").read().split()[0])
               for t in glob.glob(f"/proc/{pid}/task/*"))


def wait_ping(port, ceiling=30):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"the proxy on {port} did not answer PING within {ceiling}s")


def measure(masters, requests, reps):
    workdir = tempfile.mkdtemp(prefix=f"cluster-slots-cost-{masters}-")
    proxy = None
    try:
        out = subprocess.run([SLOTGATE, "cluster", "up", "--masters", str(masters),
                              "--replicas", "0", "--dir", workdir],
                             capture_output=True, text=True, check=True).stdout
        seed = re.search(r"seed: *(\S+)", out).group(1)
        port = free_port()
        proxy = subprocess.Popen(["taskset", "-c", "1", SLOTGATE, "proxy", "--listen",
                                  f"127.0.0.1:{port}", "--seed", seed, "--threads", "1"],
                                 stderr=subprocess.DEVNULL, env=dict(os.environ, RUST_LOG="warn"))
        wait_ping(port)
        for rep in range(reps):
            before = cpu_ns(proxy.pid)
            subprocess.run(["taskset", "-c", "0", SLOTGATE, "bench", "run", "--target",
                            f"127.0.0.1:{port}", "--command", "CLUSTER SLOTS", "--clients", "10",
                            "--requests", str(requests)], capture_output=True, check=True)
            used = cpu_ns(proxy.pid) - before
            print(f"{masters} masters rep{rep}: proxy CPU {used / requests / 1000:.2f} us"
                  " per CLUSTER SLOTS", flush=True)
    finally:
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        subprocess.run([SLOTGATE, "cluster", "down", "--dir", workdir], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    for masters in (3, 100):
        measure(masters, args.requests, args.reps)


if __name__ == "__main__":
    main()

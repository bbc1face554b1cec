#!/usr/bin/env python3
"""Memory a proxy holds per idle client, against a Redis node holding the same clients.

Starts a 3-master cluster (`slotgate cluster up`), then for each system in turn (each
`--slotgate` binary as a proxy with one worker, and the cluster's first master itself as
the peer) opens N client connections, sends one PING on each and reads its PONG (so every
connection has been read from once, as a real idle client's has), and reports the
process's RSS growth per client (VmRSS after minus before, in bytes). Why: a proxy's cost
per idle connection multiplies by the connections it holds (the "O(N) per connection"
field report). The node is the `redis-server` the cluster runs (Debian's 7.0, whose idle
client keeps its query buffer until its cron shrinks it after 2 s idle; RSS is read once it
stops moving, within 5 s).

    python3 scripts/idle_memory.py --slotgate target/release/slotgate [--slotgate OTHER]
        [--clients 10000] [--reps 3]

Prints one line per system and repetition, then the medians: `<name>: <bytes> B per idle
client (<ratio>x redis)`.
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from slotgate_tools.ports import free_port


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def wait_port(port, ceiling=20.0):
    deadline = time.monotonic() + ceiling
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {ceiling} s")


def settle(pid, ceiling=5.0):
    """RSS once it stops moving (two equal readings 200 ms apart), within a ceiling."""
    last, deadline = rss_bytes(pid), time.monotonic() + ceiling
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = rss_bytes(pid)
        if now == last:
            return now
        last = now
    return last


def per_client(pid, port, clients):
    before = settle(pid)
    conns = []
    try:
        for _ in range(clients):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            conns.append(s)
        for s in conns:
            got = b""
            while not got.endswith(b"\r\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise RuntimeError("connection closed before PONG")
                got += chunk
        after = settle(pid)
    finally:
        for s in conns:
            s.close()
    return (after - before) / clients


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slotgate", action="append", required=True)
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.clients + 1024
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    tmp = tempfile.mkdtemp(prefix="idle-memory-")
    first = args.slotgate[0]
    base = free_port()
    up = subprocess.run([first, "cluster", "up", "--masters", "3", "--replicas", "0",
                         "--port", str(base), "--dir", os.path.join(tmp, "c")],
                        capture_output=True, text=True, check=True)
    seed = next(line.split()[1] for line in up.stdout.splitlines() if line.startswith("seed:"))
    results = {}
    try:
        redis_pid = int(subprocess.run(["pgrep", "-f", f"redis-server .*:{base}"],
                                       capture_output=True, text=True).stdout.split()[0])
        for rep in range(args.reps):
            got = per_client(redis_pid, base, args.clients)
            results.setdefault("redis", []).append(got)
            print(f"rep {rep + 1} redis: {got:.0f} B per idle client", flush=True)
            for i, binary in enumerate(args.slotgate):
                name = f"slotgate[{i}] {binary}"
                port = free_port()
                env = dict(os.environ, RUST_LOG="warn")
                proxy = subprocess.Popen([binary, "proxy", "--listen", f"127.0.0.1:{port}",
                                          "--seed", seed, "--threads", "1"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=env)
                try:
                    wait_port(port)
                    got = per_client(proxy.pid, port, args.clients)
                finally:
                    proxy.terminate()
                    proxy.wait(timeout=20)
                results.setdefault(name, []).append(got)
                print(f"rep {rep + 1} {name}: {got:.0f} B per idle client", flush=True)
    finally:
        subprocess.run([first, "cluster", "down", "--dir", os.path.join(tmp, "c")],
                       capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    floor = statistics.median(results["redis"])
    print(f"medians over {args.reps} reps, {args.clients} idle clients each:")
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name}: {med:.0f} B per idle client ({med / floor:.2f}x redis)")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where a request's CPU goes: slotgate beside nutcracker and Redis hit directly, at P1 and
P16 GET and under connection churn (one GET per connection).

Why: bench_core.py says how much CPU a request costs (µs, and the ratio to a peer); this
says where it goes, so a reader sees how far from the floor the proxy is and why. Issue 17
asks for the split into client read, client write, backend write and read (amortised over
the requests that shared a syscall), and user space.

Method, per system and workload, all on bench_core.py's set-up (same pinning: load
generator and backends on CPU0, the system under test alone on CPU1; 50 clients, 64-byte
values, keys prepopulated):
1. CPU per request: the median of --reps runs of redis-benchmark, schedstat over the
   measured process's threads (bench_core.measure), untraced.
2. Shares: one run under `perf record -F 2999 -g` of that process. A sample is "user"
   when its instruction pointer is in user space; otherwise it is charged to the syscall
   whose libc wrapper entered the kernel (recv/read, writev/write/send, epoll_wait), or to
   "other kernel" (accept, close, epoll_ctl, interrupts without a syscall). On loopback the receiver's TCP
   path runs inside the sender's writev, so writev includes delivering to the peer.
3. Client or backend: one run with the syscall tracepoints of read/recvfrom/writev/write
   recorded with their fd; each fd is classed as a backend connection when its peer port
   is one of the nodes' ports. The traced time of each syscall is split between the two
   classes in proportion; the calls per request come from the same trace.
The per-request figure of a category is (1) × its share from (2), split by (3). Tracing
slows the traced run; only proportions are taken from runs 2 and 3.

Usage: python3 scripts/cost_model.py [--reps 3] [--requests 100000] [--churn 20000]
                                     [--slotgate BIN] [--out DIR]
Writes DIR/cost-model.md (default results/cost-model-YYYYmmdd-HHMMSS/) and prints it.
"""

import argparse
import collections
import dataclasses
import datetime
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402

READS = ("recvfrom", "read")
WRITES = ("writev", "write", "sendto")
TRACED = READS + ("writev", "write")
CATEGORIES = ("user", "client read", "client write", "backend read (amortised)",
              "backend write (amortised)", "epoll_wait", "accept", "epoll_ctl", "close",
              "other kernel")
CHURN_CLIENTS = 20  # as S6 and scripts/churn-syscalls: connect, one GET, close


@dataclasses.dataclass(frozen=True)
class Churn:
    """bench_core's Workload for short connections: `redis-benchmark -k 0`, one GET each."""

    name: str
    test: str
    requests: int

    def loadgen_args(self):
        return ["-t", self.test, "-c", str(CHURN_CLIENTS), "-k", "0", "-r", str(bc.KEYSPACE),
                "-n", str(self.requests), "--csv"]


def perf_during(pid, argv_perf, workload, system, workdir, name):
    """Run the load once with `perf record ... -p pid` attached; returns the data file."""
    data = os.path.join(workdir, f"{name}.data")
    perf = subprocess.Popen(["taskset", "-c", str(bc.LOADGEN_CPU), "perf", "record", "-q",
                             "-o", data, *argv_perf, "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(1.0)  # perf attaches before the load starts
    with bc.placed_for_run(system):
        bc.run_loadgen(system.port, workload.loadgen_args(),
                       timeout=120 + workload.requests / 500)
    perf.send_signal(signal.SIGINT)
    perf.wait(timeout=60)
    return data


def perf_script(data, fields):
    return subprocess.run(["perf", "script", "-i", data, "-F", fields], capture_output=True,
                          text=True, timeout=600).stdout


WRAPPERS = ((r"recv|read", "read"), (r"write|send", "write"), (r"epoll_(p)?wait", "epoll_wait"),
            (r"accept", "accept"), (r"epoll_ctl", "epoll_ctl"), (r"close", "close"))


def sample_shares(data):
    """Fraction of samples per coarse category: user, or the syscall the kernel time was
    spent in, named by the libc wrapper that entered the kernel (the kernel's own stack is
    often cut off before its syscall frame)."""
    counts = collections.Counter()
    for block in perf_script(data, "ip,sym").split("\n\n"):
        frames = [line.split(None, 1) for line in block.strip().splitlines() if line.strip()]
        if not frames:
            continue
        if not frames[0][0].startswith("ffffffff"):
            counts["user"] += 1
            continue
        caller = next((f[1] for f in frames if not f[0].startswith("ffffffff") and len(f) > 1),
                      "")
        for pattern, category in WRAPPERS:
            if re.search(pattern, caller):
                counts[category] += 1
                break
        else:
            counts["other kernel"] += 1
    total = sum(counts.values()) or 1
    return {k: v / total for k, v in counts.items()}, total


def backend_fds(pid, node_ports):
    """The fds of `pid` whose TCP peer is one of `node_ports`."""
    inodes = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", link)
        if m:
            inodes[m.group(1)] = int(fd)
    fds = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            remote_port = int(cols[2].split(":")[1], 16)
            if cols[9] in inodes and remote_port in node_ports:
                fds.add(inodes[cols[9]])
    return fds


def traced_split(data, backends, requests):
    """Per (call kind, side): traced seconds and calls per request."""
    secs, calls, pending = collections.Counter(), collections.Counter(), {}
    pat = re.compile(r"^\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_(\w+):\s*(.*)$")
    for line in perf_script(data, "tid,time,event,trace").splitlines():
        m = pat.match(line)
        if not m:
            continue
        tid, t, edge, call, rest = m.groups()
        if edge == "enter":
            fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
            pending[tid] = (float(t), int(fd.group(1), 16) if fd else -1)
            continue
        start = pending.pop(tid, None)
        if start is None:
            continue
        kind = "read" if call in READS else "write"
        side = "backend" if start[1] in backends else "client"
        secs[(kind, side)] += float(t) - start[0]
        calls[(kind, side)] += 1
    return secs, {k: v / requests for k, v in calls.items()}


def breakdown(cpu_us, shares, secs):
    """µs per request in each of CATEGORIES."""
    out = {c: cpu_us * shares.get(c, 0) for c in ("user", "epoll_wait", "accept",
                                                    "epoll_ctl", "close", "other kernel")}
    for kind, label in (("read", "read"), ("write", "write")):
        total = secs[(kind, "client")] + secs[(kind, "backend")]
        share = cpu_us * shares.get(kind, 0)
        backend = share * secs[(kind, "backend")] / total if total else 0.0
        out[f"client {label}"] = share - backend
        out[f"backend {label} (amortised)"] = backend
    return out


def profile(system, workload, reps, workdir):
    runs = [bc.measure(system, workload, "rep", r, workdir) for r in range(reps)]
    cpu_us = statistics.median(r.sut_cpu_us for r in runs)
    data = perf_during(system.sut_pid, ["-F", "2999", "-g"], workload, system, workdir,
                       f"{system.name}-{workload.name}-samples")
    shares, samples = sample_shares(data)
    events = []
    for call in TRACED:
        events += ["-e", f"syscalls:sys_enter_{call}", "-e", f"syscalls:sys_exit_{call}"]
    backends = backend_fds(system.sut_pid, set(system.served_ports)) if system.backend_pids \
        else set()
    data = perf_during(system.sut_pid, events, workload, system, workdir,
                       f"{system.name}-{workload.name}-trace")
    secs, per_req = traced_split(data, backends, workload.requests)
    return {"cpu_us": cpu_us, "runs": [r.sut_cpu_us for r in runs], "samples": samples,
            "parts": breakdown(cpu_us, shares, secs), "calls": per_req}


def table(results, workloads, names):
    head = "| µs per request (per connection for churn) | " + " | ".join(f"{n} {w.name}" for w in workloads
                                             for n in names) + " |"
    lines = [head, "|---" * (1 + len(workloads) * len(names)) + "|"]
    for cat in CATEGORIES:
        cells = [f"{results[(n, w.name)]['parts'][cat]:.2f}" for w in workloads for n in names]
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    cells = [f"**{results[(n, w.name)]['cpu_us']:.2f}**" for w in workloads for n in names]
    lines.append("| **total (median of reps)** | " + " | ".join(cells) + " |")
    for kind, side in (("read", "client"), ("write", "client"), ("read", "backend"),
                       ("write", "backend")):
        cells = [f"{results[(n, w.name)]['calls'].get((kind, side), 0):.3f}"
                 for w in workloads for n in names]
        lines.append(f"| {side} {kind} calls per request | " + " | ".join(cells) + " |")
    cells = [str(results[(n, w.name)]["samples"]) for w in workloads for n in names]
    lines.append("| perf samples | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--churn", type=int, default=20_000, help="connections in a churn run")
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    ap.add_argument("--out")
    args = ap.parse_args()
    started = datetime.datetime.now()
    out = os.path.abspath(args.out or os.path.join(
        bc.REPO, "results", "cost-model-" + started.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(out, exist_ok=True)
    workloads = [w for w in bc.workloads_for(args.requests) if w.test == "get"]
    workloads.append(Churn("churn-GET", "get", args.churn))
    os.sched_setaffinity(0, {bc.LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="cost-model-")
    procs = bc.Processes(workdir)
    results = {}
    try:
        slotgate = bc.start_slotgate(procs, args.slotgate)
        backends = [bc.start_redis(procs, f"redis-{i}") for i in range(3)]
        port, proc = backends[0]
        direct = bc.System("direct", port, proc.pid, [], [port], moves_to_sut_cpu=True)
        systems = [slotgate, bc.start_twemproxy(procs, backends), direct]
        for s in systems:
            bc.prepopulate(s)
        for w in workloads:
            for s in systems:
                print(f"{s.name} {w.name} ...", flush=True)
                results[(s.name, w.name)] = profile(s, w, args.reps, workdir)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.close()
    git = bc.command_output(["git", "-C", bc.REPO, "describe", "--always", "--dirty"])
    text = (f"Cost model, {started.isoformat(timespec='seconds')}, slotgate {git}, "
            f"{args.requests} requests per P1 run ({4 * args.requests} at P16), "
            f"median of {args.reps}; load average at end {os.getloadavg()[0]:.2f}\n\n"
            + table(results, workloads, [s.name for s in systems]) + "\n")
    with open(os.path.join(out, "cost-model.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()

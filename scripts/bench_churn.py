#!/usr/bin/env python3
"""Short connections: the CPU one connection costs slotgate, a baseline slotgate and
nutcracker, in the same run, with `redis-benchmark -k 0 -c 20` as the load (connect, one
GET, close; issue 23 asks for at most 1.0x nutcracker's, median of 5).

Why a script of its own: bench_core.py measures requests on kept connections, and the
bench's own S6 preset uses slotgate's load generator; this is the third-party load a
reviewer would use. It reuses bench_core.py's set-up (the load generator and the backends on
CPU0, the system under test alone on CPU1, schedstat CPU of the measured process around
each run) and cost_model.py's workload. The systems take turns within each round, and the
turn order rotates from round to round, so a drift of the machine is shared.

Usage: python3 scripts/bench_churn.py [--reps 5] [--connections 20000]
                                      [--slotgate BIN] [--baseline BIN --baseline-name NAME]
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as bc  # noqa: E402
from cost_model import Churn  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--connections", type=int, default=20_000)
    ap.add_argument("--slotgate", default=bc.SLOTGATE)
    ap.add_argument("--baseline", help="another slotgate binary, measured in the same rounds")
    ap.add_argument("--baseline-name", default="baseline")
    args = ap.parse_args()
    workload = Churn("churn-GET", "get", args.connections)
    os.sched_setaffinity(0, {bc.LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="bench-churn-")
    procs = bc.Processes(workdir)
    runs = []
    try:
        backends = [bc.start_redis(procs, f"redis-{i}") for i in range(3)]
        systems = [bc.start_slotgate(procs, args.slotgate, "slotgate")]
        if args.baseline:
            systems.append(bc.start_slotgate(procs, args.baseline, args.baseline_name))
        systems.append(bc.start_twemproxy(procs, backends))
        for s in systems:
            bc.prepopulate(s)
        # A warm-up round: every proxy dials its backends and fills its pools.
        bc.run_round(systems, [workload], "warmup", 0, workdir, [])
        for rep in range(1, args.reps + 1):
            turn = (rep - 1) % len(systems)
            order = systems[turn:] + systems[:turn]
            bc.run_round(order, [workload], "rep", rep, workdir, runs)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        procs.close()
    medians = {}
    for s in systems:
        cpu = [r.sut_cpu_us for r in runs if r.system == s.name]
        if cpu:
            medians[s.name] = statistics.median(cpu)
            print(f"{s.name:16} median {medians[s.name]:6.2f} µs/connection over {len(cpu)}"
                  f" runs (min {min(cpu):.2f}, max {max(cpu):.2f})")
    peer = medians.get("twemproxy")
    for name, value in medians.items():
        if peer and name != "twemproxy":
            print(f"{name} / twemproxy: {value / peer:.3f}")
    if args.baseline and args.baseline_name in medians and "slotgate" in medians:
        print(f"slotgate / {args.baseline_name}: "
              f"{medians['slotgate'] / medians[args.baseline_name]:.3f}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

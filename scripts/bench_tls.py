#!/usr/bin/env python3
"""CPU per request through TLS on both sides, against plain, measured in the same run.

Why: TLS costs the proxy CPU twice (the client's connection and the node's), and the
ratio to the same proxy in plain TCP is what an operator needs to size a TLS deployment.
Measured with bench_core.py's method and helpers (pinning, schedstat deltas around a
redis-benchmark run of fixed size, interleaved rounds, medians), on two systems:

- slotgate: one worker in front of a 3-master plain cluster (exactly bench_core's set-up);
- slotgate-tls: one worker with `tls.listen` in front of a 3-master cluster of TLS nodes
  (`slotgate cluster up --tls-cert ...`: tls-port, tls-cluster, tls-replication, client
  certificates required), `backend_tls` on, and redis-benchmark connecting with --tls.

Workloads: GET and SET, 64-byte values, 50 clients, P1 and P16, as bench_core. The TLS
sessions are set up once per redis-benchmark connection (50 per run), so the figure is the
steady-state cost of encryption, not of handshakes. Certificates (ECDSA P-256) are made for
the run with the openssl command-line tool, in the run's directory.

Usage:
    python3 scripts/bench_tls.py [--reps 5] [--requests N] [--quick] [--out DIR]
                                 [--slotgate BIN] [--check]
--check starts both systems, sends a few requests through each, and stops: a wiring test
that measures nothing. Results go to results/bench-tls-YYYYmmdd-HHMMSS/ (results.md,
results.json). Needs what bench_core.py needs (redis-server, redis-benchmark with TLS,
taskset) plus openssl, and target/release/slotgate.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core as core  # noqa: E402  (the shared method and helpers)

SYSTEMS = ("slotgate", "slotgate-tls")
# redis-benchmark's TLS flags, by the port they apply to (the TLS system's listener).
TLS_ARGS = {}


def run_loadgen(port, args, timeout):
    """bench_core's run_loadgen, with --tls for the TLS listener."""
    return PLAIN_RUN_LOADGEN(port, [*TLS_ARGS.get(port, []), *args], timeout)


PLAIN_RUN_LOADGEN = core.run_loadgen
core.run_loadgen = run_loadgen


def make_certs(workdir):
    """A CA and one leaf for 127.0.0.1 (server and client use), as PEM files."""
    d = os.path.join(workdir, "pki")
    os.makedirs(d, exist_ok=True)
    p = {n: os.path.join(d, n) for n in ("ca.key", "ca.crt", "leaf.key", "leaf.csr",
                                         "leaf.crt", "ext.cnf")}

    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p["ca.key"])
    ssl("req", "-x509", "-new", "-key", p["ca.key"], "-days", "2", "-subj",
        "/CN=bench-tls CA", "-out", p["ca.crt"])
    ssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", p["leaf.key"])
    ssl("req", "-new", "-key", p["leaf.key"], "-subj", "/CN=127.0.0.1", "-out", p["leaf.csr"])
    with open(p["ext.cnf"], "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth,clientAuth\n")
    ssl("x509", "-req", "-in", p["leaf.csr"], "-CA", p["ca.crt"], "-CAkey", p["ca.key"],
        "-CAcreateserial", "-days", "2", "-extfile", p["ext.cnf"], "-out", p["leaf.crt"])
    return p["ca.crt"], p["leaf.crt"], p["leaf.key"]


def start_slotgate_tls(procs, binary, certs):
    """A 3-master TLS cluster (`cluster up --tls-*`) and a TLS proxy in front of it."""
    ca, cert, key = certs
    cluster_dir = os.path.join(procs.workdir, "cluster-tls")
    base = core.free_cluster_base(6)  # 3 plain ports, then the 3 TLS ports (base+3..)
    procs.on_close(subprocess.run, [binary, "cluster", "down", "--dir", cluster_dir],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    up = subprocess.run(["taskset", "-c", str(core.LOADGEN_CPU), binary, "cluster", "up",
                         "--masters", "3", "--replicas", "0", "--port", str(base),
                         "--dir", cluster_dir, "--tls-cert", cert, "--tls-key", key,
                         "--tls-ca", ca],
                        capture_output=True, text=True, timeout=120, start_new_session=True)
    if up.returncode != 0:
        raise core.BenchError(f"`slotgate cluster up --tls-cert ...` failed: "
                              f"{(up.stderr or up.stdout).strip()[-800:]}")
    tls_seed = re.search(r"^tls seed:\s*(\S+)", up.stdout, re.M)
    masters = re.search(r"^masters:\s*(.+)$", up.stdout, re.M)
    if not (tls_seed and masters):
        raise core.BenchError(f"cannot parse `cluster up` output:\n{up.stdout}")
    # INFO and the pids through the nodes' plain ports, which devcluster keeps.
    master_ports = [int(a.rsplit(":", 1)[1]) for a in masters.group(1).split()]
    master_pids = [core.redis_pid(p) for p in master_ports]
    port, plain_port = core.free_port(), core.free_port()
    conf = os.path.join(procs.workdir, "slotgate-tls.toml")
    with open(conf, "w") as f:
        f.write(f'[proxy]\nlisten = "127.0.0.1:{plain_port}"\nthreads = 1\n'
                f'[cluster]\nseeds = ["{tls_seed.group(1)}"]\n'
                f'[tls]\nlisten = "127.0.0.1:{port}"\ncert_file = "{cert}"\nkey_file = "{key}"\n'
                f'[backend_tls]\nenabled = true\nca_file = "{ca}"\n'
                f'cert_file = "{cert}"\nkey_file = "{key}"\n')
    TLS_ARGS[port] = ["--tls", "--cacert", ca, "--cert", cert, "--key", key]
    env = dict(os.environ, RUST_LOG="warn")
    proc = procs.start("slotgate-tls-proxy", [binary, "proxy", "--config", conf],
                       cpu=core.SUT_CPU, env=env)
    # Ready through the plain listener (same process, same routing, same TLS nodes).
    core.wait_ready(plain_port, proc, "slotgate-tls proxy")
    return core.System("slotgate-tls", port, proc.pid, master_pids, master_ports)


def check(systems):
    """A few requests through each system, with redis-benchmark itself."""
    for system in systems:
        core.run_loadgen(system.port, ["-t", "set,get", "-n", "200", "-c", "2", "-q"],
                         timeout=60)
        print(f"  {system.name}: SET/GET through port {system.port} ok", flush=True)


def summarize(runs, workloads):
    """Median CPU per request per (system, workload) and the TLS ÷ plain ratio."""
    lines = ["| workload | slotgate µs/req | slotgate-tls µs/req | TLS ÷ plain | "
             "backends plain | backends TLS |", "|---|---|---|---|---|---|"]
    table = {}
    for w in workloads:
        row = {}
        for s in SYSTEMS:
            reps = [r for r in runs if r.system == s and r.workload == w.name
                    and r.phase == "rep"]
            if reps:
                row[s] = (statistics.median(r.sut_cpu_us for r in reps),
                          statistics.median(r.backend_cpu_us for r in reps))
        table[w.name] = row
        if len(row) == 2:
            (p, pb), (t, tb) = row["slotgate"], row["slotgate-tls"]
            lines.append(f"| {w.name} | {p:.2f} | {t:.2f} | {t / p:.2f} | {pb:.2f} | {tb:.2f} |")
    return "\n".join(lines), table


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--requests", type=int, default=core.DEFAULT_REQUESTS)
    ap.add_argument("--quick", action="store_true", help="2 reps of 10,000 requests")
    ap.add_argument("--out", default=None)
    ap.add_argument("--slotgate", default=core.SLOTGATE)
    ap.add_argument("--check", action="store_true", help="wire both systems up, measure nothing")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.requests = 2, core.QUICK_REQUESTS
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or os.path.join(core.REPO, "results", f"bench-tls-{stamp}")
    workdir = tempfile.mkdtemp(prefix="bench-tls-")
    procs = core.Processes(workdir)
    try:
        certs = make_certs(workdir)
        systems = [core.start_slotgate(procs, args.slotgate),
                   start_slotgate_tls(procs, args.slotgate, certs)]
        if args.check:
            return check(systems)
        workloads = [core.Workload(f"{mode}-{test.upper()}", test, pipe, args.requests)
                     for mode, pipe in (("P1", 1), ("P16", core.PIPELINE))
                     for test in ("get", "set")]
        for system in systems:
            core.prepopulate(system)
        runs = []
        core.run_round(systems, workloads, "warmup", 0, workdir, runs)
        for rep in range(1, args.reps + 1):
            core.run_round(systems, workloads, "rep", rep, workdir, runs)
        text, table = summarize(runs, workloads)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "results.md"), "w") as f:
            f.write(f"# CPU per request, TLS on both sides vs plain ({stamp})\n\n"
                    f"{args.reps} reps of {args.requests} requests, 50 clients, "
                    f"64-byte values; medians.\n\n{text}\n")
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump({"runs": [asdict(r) for r in runs], "medians": table}, f, indent=1)
        print(text)
        print(f"results in {out}")
    except core.BenchError as e:
        print(f"bench_tls: {e}", file=sys.stderr)
        return 1
    finally:
        procs.close()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""CPU cost per request of slotgate, twemproxy and Redis itself, measured in one run.

Why: on the small, shared, 2-vCPU VMs this project is developed on, throughput swings
several-fold from one run to the next, and the load generator saturates before a proxy
does. Requests per second therefore says little about a proxy. What is stable is the CPU
time the proxy spends per request, and what transfers between machines is its ratio to a
peer (twemproxy) and to a floor (Redis hit directly) measured in the same run. This script
produces those ratios for the core workloads: GET and SET, 64-byte values, 50 clients,
without pipelining (P1) and with 16-deep pipelines (P16).

Method:
- Systems. slotgate (one worker thread) in front of a 3-master local Redis Cluster;
  nutcracker 0.5.0 at `-v 4` in front of 3 standalone redis-servers; one of those
  redis-servers hit directly. With --baseline BIN, a fourth system (named by
  --baseline-name, default slotgate-base) is set up exactly like slotgate but entirely
  from BIN: its own `BIN cluster up` cluster and its own `BIN proxy`, same flags. That
  measures an older build beside the current one, e.g. to show a refactor costs nothing.
- CPU per request. The on-CPU nanoseconds of the system under test, summed over its
  threads from /proc/<pid>/task/*/schedstat, read right before and right after a
  redis-benchmark run of a fixed request count, divided by that count. The same is
  recorded for the backends and, through wait4's rusage, for redis-benchmark itself.
- Pinning. redis-benchmark, this script and every backend redis-server run on CPU0; the
  system under test runs alone on CPU1. For "direct" the measured redis-server is moved
  to CPU1 for the duration of its runs and back to CPU0 afterwards.
- Order. Keys are prepopulated through each system first. One discarded warm-up round,
  then --reps rounds; within a round each workload runs on slotgate, (the baseline,)
  twemproxy, direct in turn, so drifts in machine load hit all systems alike. Medians and
  min-max are reported; a ratio between two systems (slotgate ÷ twemproxy, slotgate ÷
  slotgate-base, ...) is the ratio of their medians.
- Syscalls. `perf stat -e raw_syscalls:sys_enter` attached to the system under test.
  Counting tracepoints adds about 5-10% to the CPU of the traced process on this VM, so
  syscalls are counted in one extra interleaved round whose CPU figures are not used.
- Checks. Each run also reads INFO from the Redis servers that executed the requests:
  the GET/SET calls they saw must match the requests sent, and GETs must hit.

Usage:
    python3 scripts/bench_core.py [--reps 5] [--requests N] [--quick] [--out DIR]
                                  [--update-benchmarks-md] [--slotgate BIN]
                                  [--baseline BIN [--baseline-name NAME]]
Results go to results/bench-core-YYYYmmdd-HHMMSS/ (results.md, results.json). Needs
redis-server, redis-benchmark, nutcracker and taskset on PATH, perf for the syscall
column, and target/release/slotgate (`cargo build --release -p slotgate`) or the binary
given by --slotgate; without a working slotgate binary the other systems are still
measured. Without --baseline, results are as before this option existed.
"""

import argparse
import contextlib
import datetime
import glob
import json
import os
import platform
import re
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from slotgate_tools.ports import free_port, port_is_free
from slotgate_tools.resp import Closed, Conn, RespError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOTGATE = os.path.join(REPO, "target", "release", "slotgate")
BENCHMARKS_MD = os.path.join(REPO, "BENCHMARKS.md")
MD_START, MD_END = "<!-- bench-core:start -->", "<!-- bench-core:end -->"

LOADGEN_CPU = 0  # redis-benchmark, this script, every backend redis-server
SUT_CPU = 1  # the system under test, alone
CLIENTS = 50
KEYSPACE = 100_000  # redis-benchmark -r: keys key:000000000000 .. key:000000099999 (16 bytes)
VALUE_SIZE = 64
PIPELINE = 16
PREPOPULATE_REQUESTS = 500_000  # random SETs over the key space: about 99% of keys exist
NUTCRACKER_MBUF = 16384  # nutcracker -m, fixed for every run
SYSTEMS = ("slotgate", "twemproxy", "direct")
DEFAULT_BASELINE_NAME = "slotgate-base"
TARGETS = {"P1": 0.9, "P16": 0.7}  # slotgate CPU/req ÷ twemproxy CPU/req, at most
DEFAULT_REQUESTS = 100_000
QUICK_REQUESTS = 10_000


class BenchError(Exception):
    """A failure with a message meant for the person running the benchmark."""


@dataclass(frozen=True)
class Workload:
    name: str  # e.g. "P16-GET"
    test: str  # redis-benchmark -t
    pipeline: int
    requests: int

    @property
    def mode(self):
        return self.name.split("-")[0]

    def loadgen_args(self):
        return ["-t", self.test, "-c", str(CLIENTS), "-r", str(KEYSPACE), "-d", str(VALUE_SIZE),
                "-n", str(self.requests), "-P", str(self.pipeline), "--csv"]


@dataclass
class System:
    """An endpoint under test and the processes whose CPU is attributed to it."""

    name: str
    port: int
    sut_pid: int
    backend_pids: list  # servers behind a proxy; empty for direct
    served_ports: list  # the Redis servers that execute the requests (for the INFO checks)
    moves_to_sut_cpu: bool = False  # direct: the measured server is itself the SUT
    failed: str = ""  # set when a run failed; the system is skipped from then on


@dataclass
class Run:
    system: str
    workload: str
    phase: str  # warmup | rep | syscalls
    rep: int
    requests: int
    served: int  # GET/SET calls the Redis servers executed during the run
    hit_ratio: float  # GET only: keyspace hits / (hits + misses) on the Redis servers
    wall_s: float
    rps: float  # as reported by redis-benchmark
    sut_cpu_us: float  # per request, as are the next three
    loadgen_cpu_us: float
    backend_cpu_us: float
    syscalls: float  # None unless phase == "syscalls"
    sut_core_busy: float  # SUT CPU time / wall time
    rss_mib: float
    loadavg1: float


# ---------------------------------------------------------------------------- processes


class Processes:
    """Owns every process the benchmark starts and ends them, and only them, on close."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.stack = contextlib.ExitStack()

    def start(self, name, argv, cpu, env=None):
        """Start argv pinned to `cpu`, logging to workdir/name.log, in its own session so
        that a Ctrl-C reaches only this script, which then stops it in order."""
        log_path = os.path.join(self.workdir, name + ".log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(["taskset", "-c", str(cpu), *argv], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        proc.log_path = log_path
        proc.name = name
        self.stack.callback(stop_process, proc)
        return proc

    def on_close(self, fn, *args, **kwargs):
        self.stack.callback(fn, *args, **kwargs)

    def close(self):
        self.stack.close()


def stop_process(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def log_tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no log)"


def pin(pid, cpu):
    """Move every thread of pid to `cpu`."""
    subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], check=True,
                   stdout=subprocess.DEVNULL)


def allowed_cpus(pid):
    return proc_status_field(pid, "Cpus_allowed_list")


def proc_status_field(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    raise BenchError(f"no {key} in /proc/{pid}/status")


def schedstat_ns(pid):
    """On-CPU nanoseconds of all threads of pid."""
    total = 0
    paths = glob.glob(f"/proc/{pid}/task/*/schedstat")
    if not paths:
        raise BenchError(f"process {pid} is gone")
    for path in paths:
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            pass  # a thread that exited between glob and read
    return total


def rss_mib(pid):
    return int(proc_status_field(pid, "VmRSS").split()[0]) / 1024


# ---------------------------------------------------------------------------- ports, RESP


def free_cluster_base(count):
    """A port p such that p..p+count-1 and their cluster-bus ports (+10000) are free."""
    for _ in range(100):
        base = free_port()
        ports = [base + i for i in range(count)] + [base + 10000 + i for i in range(count)]
        if ports[-1] < 65536 and all(port_is_free(p) for p in ports):
            return base
    raise BenchError(f"found no {count} free ports with free bus ports (+10000)")


def resp_call(port, *args, timeout=5.0):
    """Send one command, return the decoded reply (str, int, None; errors as BenchError)."""
    with Conn(port, timeout=timeout, errors="replace") as c:
        c.send(*args)
        try:
            reply = c.read()
        except Closed:
            raise BenchError(f"port {port}: connection closed before a reply to {args[0]}") \
                from None
    if isinstance(reply, RespError):
        raise BenchError(f"port {port}: {args[0]} -> -{reply}")
    return reply


def wait_ready(port, proc, what, timeout=30.0):
    """Wait until the endpoint answers PING and serves a GET (for a proxy: routes it)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError(f"{what} exited with status {proc.returncode}; "
                             f"last lines of {proc.log_path}:\n{log_tail(proc.log_path)}")
        try:
            if resp_call(port, "PING", timeout=1) == "PONG":
                resp_call(port, "GET", "bench-core:probe", timeout=1)
                return
        except (OSError, BenchError) as e:
            last = str(e)
        time.sleep(0.1)
    raise BenchError(f"{what} on port {port} not ready after {timeout:.0f}s ({last})")


def server_counters(ports):
    """Summed GET/SET calls and keyspace hits/misses of the Redis servers on `ports`."""
    total = {"get": 0, "set": 0, "hits": 0, "misses": 0}
    for port in ports:
        info = resp_call(port, "INFO", "stats", "commandstats")
        for key, pattern in (("get", r"^cmdstat_get:calls=(\d+)"),
                             ("set", r"^cmdstat_set:calls=(\d+)"),
                             ("hits", r"^keyspace_hits:(\d+)"),
                             ("misses", r"^keyspace_misses:(\d+)")):
            m = re.search(pattern, info, re.M)
            total[key] += int(m.group(1)) if m else 0
    return total


def redis_pid(port):
    return int(re.search(r"^process_id:(\d+)", resp_call(port, "INFO", "server"), re.M).group(1))


# ---------------------------------------------------------------------------- systems


def start_redis(procs, name, cpu=LOADGEN_CPU):
    port = free_port()
    proc = procs.start(name, ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--daemonize", "no",
                              "--dir", procs.workdir], cpu=cpu)
    wait_ready(port, proc, name)
    return port, proc


def write_nutcracker_yml(path, port, backends):
    """The one nutcracker pool file both nutcracker and `slotgate --nutcracker` read."""
    with open(path, "w") as f:
        f.write("bench:\n"
                f"  listen: 127.0.0.1:{port}\n"
                "  redis: true\n"
                "  hash: fnv1a_64\n"
                "  distribution: ketama\n"
                '  hash_tag: "{}"\n'
                "  auto_eject_hosts: false\n"
                "  servers:\n")
        for i, (bport, _) in enumerate(backends):
            f.write(f"   - 127.0.0.1:{bport}:1 redis{i}\n")


def start_twemproxy(procs, backends):
    port, stats_port = free_port(), free_port()
    conf = os.path.join(procs.workdir, "nutcracker.yml")
    write_nutcracker_yml(conf, port, backends)
    # -v 4: the default -v 5 logs every request (getpeername + formatting), inflating its
    # CPU by 12-35%. -s/-a: the stats listener must not take the fixed default port 22222.
    proc = procs.start("nutcracker", ["nutcracker", "-c", conf, "-v", "4",
                                      "-m", str(NUTCRACKER_MBUF), "-s", str(stats_port),
                                      "-a", "127.0.0.1"], cpu=SUT_CPU)
    wait_ready(port, proc, "nutcracker")
    return System("twemproxy", port, proc.pid, [p.pid for _, p in backends],
                  [bport for bport, _ in backends])


def start_slotgate(procs, binary, name="slotgate"):
    """A 3-master, 0-replica cluster from `binary cluster up` and `binary proxy` in front,
    as the system `name` (slotgate, or a baseline build set up exactly alike)."""
    if not os.access(binary, os.X_OK):
        raise BenchError(f"{binary} not found; build it with `cargo build --release -p slotgate`")
    cluster_dir = os.path.join(procs.workdir, "cluster" if name == "slotgate"
                               else f"cluster-{name}")
    base = free_cluster_base(3)
    procs.on_close(subprocess.run, [binary, "cluster", "down", "--dir", cluster_dir],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The nodes inherit the CPU0 affinity of `cluster up`.
    up = subprocess.run(["taskset", "-c", str(LOADGEN_CPU), binary, "cluster", "up",
                         "--masters", "3", "--replicas", "0", "--port", str(base),
                         "--dir", cluster_dir],
                        capture_output=True, text=True, timeout=120, start_new_session=True)
    if up.returncode != 0:
        raise BenchError(f"`slotgate cluster up` failed ({up.returncode}): "
                         f"{(up.stderr or up.stdout).strip()[-800:]}")
    seed = re.search(r"^seed:\s*(\S+)", up.stdout, re.M)
    masters = re.search(r"^masters:\s*(.+)$", up.stdout, re.M)
    if not (seed and masters):
        raise BenchError(f"cannot parse `slotgate cluster up` output:\n{up.stdout}")
    master_ports = [int(a.rsplit(":", 1)[1]) for a in masters.group(1).split()]
    master_pids = [redis_pid(p) for p in master_ports]
    port = free_port()
    env = dict(os.environ, RUST_LOG="warn")
    proc = procs.start(f"{name}-proxy", [binary, "proxy", "--listen", f"127.0.0.1:{port}",
                                         "--seed", seed.group(1), "--threads", "1"],
                       cpu=SUT_CPU, env=env)
    wait_ready(port, proc, f"{name} proxy")
    return System(name, port, proc.pid, master_pids, master_ports)


def start_slotgate_sharded(procs, binary, backends, name="slotgate"):
    """`binary proxy --nutcracker` over the very servers twemproxy serves, from the same
    pool file (its own listen port): both proxies measured on identical backends."""
    if not os.access(binary, os.X_OK):
        raise BenchError(f"{binary} not found; build it with `cargo build --release -p slotgate`")
    port = free_port()
    conf = os.path.join(procs.workdir, f"{name}-nutcracker.yml")
    write_nutcracker_yml(conf, port, backends)
    env = dict(os.environ, RUST_LOG="warn")
    proc = procs.start(f"{name}-proxy", [binary, "proxy", "--nutcracker", conf,
                                         "--threads", "1"], cpu=SUT_CPU, env=env)
    wait_ready(port, proc, f"{name} proxy")
    return System(name, port, proc.pid, [p.pid for _, p in backends],
                  [bport for bport, _ in backends])


@contextlib.contextmanager
def placed_for_run(system):
    """Give the measured process CPU1 for the run; for direct that means moving it."""
    if system.moves_to_sut_cpu:
        pin(system.sut_pid, SUT_CPU)
    try:
        yield
    finally:
        if system.moves_to_sut_cpu:
            pin(system.sut_pid, LOADGEN_CPU)


# ---------------------------------------------------------------------------- measurement


def run_loadgen(port, args, timeout):
    """Run redis-benchmark pinned to CPU0; return (output, CPU seconds it used)."""
    argv = ["taskset", "-c", str(LOADGEN_CPU), "redis-benchmark", "-h", "127.0.0.1",
            "-p", str(port), *args]
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while True:  # wait4 rather than wait: it also returns the child's rusage
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"redis-benchmark on port {port} did not finish in "
                                     f"{timeout:.0f}s: the endpoint may have stalled")
                time.sleep(0.05)
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"redis-benchmark exited with {proc.returncode}:\n{text[-800:]}")
    errors = [line for line in text.splitlines() if line.startswith("Error from server")]
    if errors:
        raise BenchError(f"redis-benchmark got error replies, e.g. {errors[0]!r}")
    return text, usage.ru_utime + usage.ru_stime


def csv_rps(text, test):
    m = re.search(r'^"%s","([\d.]+)"' % test.upper(), text, re.M)
    if not m:
        raise BenchError(f"no {test.upper()} line in redis-benchmark output:\n{text[-800:]}")
    return float(m.group(1))


class SyscallCounter:
    """perf stat on one pid, enabled and disabled through its control pipe, so that the
    count covers the measured window and nothing of perf's own start-up."""

    def __init__(self, pid, output):
        self.output = output
        ctl_r, self.ctl_w = os.pipe()
        self.ack_r, ack_w = os.pipe()
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(LOADGEN_CPU), "perf", "stat", "-D", "-1", "-x,",
             "--control", f"fd:{ctl_r},{ack_w}", "-e", "raw_syscalls:sys_enter",
             "-p", str(pid), "-o", output],
            pass_fds=(ctl_r, ack_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        os.close(ctl_r)
        os.close(ack_w)

    def _command(self, word):
        os.write(self.ctl_w, word.encode() + b"\n")
        if not select.select([self.ack_r], [], [], 10)[0] or b"ack" not in os.read(self.ack_r, 64):
            raise BenchError(f"perf stat did not acknowledge '{word}'")

    def __enter__(self):
        try:
            self._command("enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def stop(self):
        """Disable counting, end perf and return the number of syscalls."""
        self._command("disable")
        self.close()
        with open(self.output) as f:
            for line in f:
                fields = line.strip().split(",")
                if len(fields) > 2 and fields[2] == "raw_syscalls:sys_enter":
                    return int(fields[0])
        raise BenchError(f"no syscall count in {self.output}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for fd in (self.ctl_w, self.ack_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.ctl_w = self.ack_r = -1  # closed: a second close() must not hit reused fds


def measure(system, workload, phase, rep, workdir):
    """One redis-benchmark run against `system`, with the CPU deltas around it."""
    perf_out = os.path.join(workdir, "perf.txt")
    with placed_for_run(system):
        before = server_counters(system.served_ports)
        counter = SyscallCounter(system.sut_pid, perf_out) if phase == "syscalls" else None
        with counter or contextlib.nullcontext():
            sut0 = schedstat_ns(system.sut_pid)
            backends0 = sum(schedstat_ns(p) for p in system.backend_pids)
            t0 = time.monotonic()
            text, loadgen_s = run_loadgen(system.port, workload.loadgen_args(),
                                          timeout=60 + workload.requests / 1000)
            wall = time.monotonic() - t0
            sut = schedstat_ns(system.sut_pid) - sut0
            backends = sum(schedstat_ns(p) for p in system.backend_pids) - backends0
            syscalls = counter.stop() if counter else None
        after = server_counters(system.served_ports)
    n = workload.requests
    served = after[workload.test] - before[workload.test]
    lookups = (after["hits"] - before["hits"]) + (after["misses"] - before["misses"])
    return Run(
        system=system.name, workload=workload.name, phase=phase, rep=rep, requests=n,
        served=served,
        hit_ratio=(after["hits"] - before["hits"]) / lookups if lookups else None,
        wall_s=wall, rps=csv_rps(text, workload.test),
        sut_cpu_us=sut / 1000 / n, loadgen_cpu_us=loadgen_s * 1e6 / n,
        backend_cpu_us=backends / 1000 / n if system.backend_pids else None,
        syscalls=syscalls / n if syscalls is not None else None,
        sut_core_busy=sut / 1e9 / wall, rss_mib=rss_mib(system.sut_pid),
        loadavg1=os.getloadavg()[0])


def prepopulate(system):
    """SET every key of the key space (about 99% of it) through the system's own endpoint."""
    run_loadgen(system.port, ["-t", "set", "-c", str(CLIENTS), "-r", str(KEYSPACE),
                              "-d", str(VALUE_SIZE), "-n", str(PREPOPULATE_REQUESTS),
                              "-P", str(PIPELINE), "-q"], timeout=300)


def run_round(systems, workloads, phase, rep, workdir, runs):
    """Each workload on each live system in turn; a failing system is dropped."""
    width = max([10] + [len(s.name) for s in systems])
    for workload in workloads:
        for system in systems:
            if system.failed:
                continue
            try:
                run = measure(system, workload, phase, rep, workdir)
            except BenchError as e:
                system.failed = " ".join(f"{phase} {rep} {workload.name}: {e}".split())
                print(f"  {system.name} FAILED, dropped from the benchmark: {e}", flush=True)
                continue
            runs.append(run)
            print(f"  {phase:8} {rep:>2} {workload.name:8} {system.name:{width}}"
                  f" {run.sut_cpu_us:6.2f} µs/req   loadgen {run.loadgen_cpu_us:5.2f}"
                  f"  backends {fmt(run.backend_cpu_us):>5}"
                  + (f"  syscalls {run.syscalls:5.2f}" if run.syscalls is not None else "")
                  + f"  {run.rps / 1000:6.1f}k rps  load {run.loadavg1:.2f}", flush=True)


# ---------------------------------------------------------------------------- reporting


def summarize(runs, systems, workloads, baseline=None):
    """Per (system, workload): medians and ranges over the reps; ratios between systems,
    each the ratio of their medians. `baseline`: the name of a baseline slotgate, if any."""
    rows = []
    for workload in workloads:
        for system in systems:
            reps = [r for r in runs if r.system == system.name and r.workload == workload.name
                    and r.phase == "rep"]
            sys_runs = [r for r in runs if r.system == system.name
                        and r.workload == workload.name and r.phase == "syscalls"]
            if not reps:
                rows.append({"system": system.name, "workload": workload.name, "reps": 0,
                             "failed": system.failed or "not run"})
                continue
            cpu = [r.sut_cpu_us for r in reps]
            hits = [r.hit_ratio for r in reps if r.hit_ratio is not None]
            rows.append({
                "system": system.name, "workload": workload.name, "reps": len(reps),
                "cpu_us_median": statistics.median(cpu), "cpu_us_min": min(cpu),
                "cpu_us_max": max(cpu),
                "loadgen_cpu_us_median": statistics.median(r.loadgen_cpu_us for r in reps),
                "backend_cpu_us_median": (statistics.median(r.backend_cpu_us for r in reps)
                                          if reps[0].backend_cpu_us is not None else None),
                "syscalls_per_req": sys_runs[0].syscalls if sys_runs else None,
                "rss_mib": reps[-1].rss_mib,
                "rps_median": statistics.median(r.rps for r in reps),
                "sut_core_busy_median": statistics.median(r.sut_core_busy for r in reps),
                "hit_ratio_min": min(hits) if hits else None,
                "served_ok": all(r.served == r.requests for r in reps),
                "failed": system.failed,
            })
    medians = {(r["system"], r["workload"]): r.get("cpu_us_median") for r in rows}

    def ratio(a, b, workload):
        x, y = medians.get((a, workload)), medians.get((b, workload))
        return x / y if x and y else None

    ratios = []
    for workload in workloads:
        vs_twemproxy = ratio("slotgate", "twemproxy", workload.name)
        target = TARGETS[workload.mode]
        ratios.append({
            "workload": workload.name,
            "slotgate_over_twemproxy": vs_twemproxy,
            "slotgate_over_direct": ratio("slotgate", "direct", workload.name),
            "twemproxy_over_direct": ratio("twemproxy", "direct", workload.name),
            "target_vs_twemproxy": target,
            "meets_target": None if vs_twemproxy is None else vs_twemproxy <= target,
        })
        if baseline:
            ratios[-1]["slotgate_over_baseline"] = ratio("slotgate", baseline, workload.name)
    return rows, ratios


def unequal_load_notes(rows, baseline=None):
    """CPU per request falls as load rises (more batching), so a proxy comparison is
    fair only when both proxies ran at about the same request rate."""
    notes = []
    rps = {(r["system"], r["workload"]): r.get("rps_median") for r in rows}
    peers = ["twemproxy"] + ([baseline] if baseline else [])
    for workload in dict.fromkeys(r["workload"] for r in rows):
        for peer in peers:
            a, b = rps.get(("slotgate", workload)), rps.get((peer, workload))
            if a and b and max(a, b) / min(a, b) > 1.15:
                notes.append(f"{workload}: slotgate ran at {a:,.0f} rps and {peer} at {b:,.0f}; "
                             "at unequal load their CPU per request is not strictly comparable")
    return notes


def fmt(value, spec=".2f", none="–"):
    return none if value is None else format(value, spec)


def markdown(meta, rows, ratios):
    out = [
        f"Run {meta['date']} on {meta['machine']['model']} ({meta['machine']['nproc']} vCPU, "
        f"kernel {meta['machine']['kernel']}), commit {meta['git']}. "
        f"Load average {meta['loadavg_start'][0]:.2f} at start, "
        f"{meta['loadavg_end'][0]:.2f} at end.",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"{meta['reps']} interleaved reps after 1 discarded warm-up round; "
        f"{CLIENTS} clients, {VALUE_SIZE}-byte values, {KEYSPACE} keys prepopulated; "
        f"P1 runs {meta['requests']['P1']} requests, P16 runs {meta['requests']['P16']}.",
        "",
        "| Workload | System | CPU µs/req, median (min–max) | Syscalls/req | RSS MiB "
        "| Load gen µs/req | Backends µs/req | rps (median) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["reps"]:
            out.append(f"| {r['workload']} | {r['system']} | not measured: "
                       f"{r['failed'][:120]} | | | | | |")
            continue
        flags = "" if r["served_ok"] else " ⚠ served≠sent"
        if r["hit_ratio_min"] is not None and r["hit_ratio_min"] < 0.95:
            flags += f" ⚠ hits {r['hit_ratio_min']:.0%}"
        out.append(
            f"| {r['workload']} | {r['system']} | **{fmt(r['cpu_us_median'])}** "
            f"({fmt(r['cpu_us_min'])}–{fmt(r['cpu_us_max'])}){flags} "
            f"| {fmt(r['syscalls_per_req'])} | {fmt(r['rss_mib'], '.1f')} "
            f"| {fmt(r['loadgen_cpu_us_median'])} | {fmt(r['backend_cpu_us_median'])} "
            f"| {fmt(r['rps_median'], ',.0f')} |")
    baseline = meta.get("baseline")
    extra = f" slotgate ÷ {baseline['name']} |" if baseline else ""
    out += ["", "| Workload | slotgate ÷ twemproxy | target | slotgate ÷ direct "
                "| twemproxy ÷ direct |" + extra,
            "|---|---|---|---|---|" + ("---|" if baseline else "")]
    for r in ratios:
        verdict = {True: "met", False: "**missed**", None: "n/a"}[r["meets_target"]]
        out.append(f"| {r['workload']} | {fmt(r['slotgate_over_twemproxy'])} "
                   f"| ≤ {r['target_vs_twemproxy']} ({verdict}) "
                   f"| {fmt(r['slotgate_over_direct'])} | {fmt(r['twemproxy_over_direct'])} |"
                   + (f" {fmt(r['slotgate_over_baseline'], '.3f')} |" if baseline else ""))
    out += ["", "Pinning (Cpus_allowed_list): " + ", ".join(
        f"{name} {cpus}" for name, cpus in meta["pinning"].items()) + ".",
            "Versions: " + "; ".join(f"{k}: {v}" for k, v in meta["versions"].items()) + "."]
    if baseline:
        out.append(f"Binaries: slotgate `{meta['slotgate_binary']}`; {baseline['name']} "
                   f"`{baseline['binary']}` (its own cluster and proxy, set up like slotgate's); "
                   f"slotgate ÷ {baseline['name']} is the ratio of the CPU µs/req medians.")
    if meta["notes"]:
        out += [""] + [f"- {note}" for note in meta["notes"]]
    return "\n".join(out) + "\n"


def update_benchmarks_md(section, results_dir):
    with open(BENCHMARKS_MD) as f:
        text = f.read()
    if MD_START not in text or MD_END not in text:
        raise BenchError(f"{BENCHMARKS_MD} lacks the {MD_START} / {MD_END} markers")
    head, rest = text.split(MD_START, 1)
    _, tail = rest.split(MD_END, 1)
    rel = os.path.relpath(results_dir, REPO)
    body = f"{MD_START}\n{section}\nRaw runs: `{rel}/results.json`.\n{MD_END}"
    with open(BENCHMARKS_MD, "w") as f:
        f.write(head + body + tail)


# ---------------------------------------------------------------------------- context


def command_output(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unavailable"


def machine_info():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release()}


def perf_problem():
    """Why syscalls cannot be counted here, or None when perf tracepoints work."""
    if not shutil.which("perf"):
        return "perf is not installed"
    p = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"],
                       capture_output=True, text=True)
    if p.returncode != 0 or not re.search(r"^\d+,", p.stderr, re.M):
        return f"perf cannot count raw_syscalls:sys_enter: {p.stderr.strip()[-200:]}"
    return None


def check_tools():
    missing = [t for t in ("redis-server", "redis-benchmark", "nutcracker", "taskset")
               if not shutil.which(t)]
    if missing:
        raise BenchError(f"missing on PATH: {', '.join(missing)} "
                         "(Debian: apt-get install redis-server redis-tools nutcracker util-linux)")
    if os.cpu_count() < 2:
        raise BenchError("needs at least 2 CPUs (load generator on CPU0, proxy on CPU1)")


# ---------------------------------------------------------------------------- main


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5, help="measured rounds (default 5)")
    p.add_argument("--requests", type=int, default=DEFAULT_REQUESTS,
                   help=f"requests per P1 run; P16 runs 4x that (default {DEFAULT_REQUESTS})")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: 1 rep of {QUICK_REQUESTS} requests")
    p.add_argument("--out", help="results directory (default results/bench-core-<date>)")
    p.add_argument("--update-benchmarks-md", action="store_true",
                   help="replace the bench-core section of BENCHMARKS.md with this run")
    p.add_argument("--slotgate", metavar="BIN",
                   help="the slotgate binary under test (default target/release/slotgate)")
    p.add_argument("--baseline", metavar="BIN",
                   help="an older slotgate binary, measured as one more system in the same "
                        "interleaved rounds, with its own cluster and proxy from BIN")
    p.add_argument("--sharded", action="store_true",
                   help="run slotgate (and the baseline) as `proxy --nutcracker` over "
                        "twemproxy's own three servers instead of over a cluster")
    p.add_argument("--baseline-name", default=DEFAULT_BASELINE_NAME, metavar="NAME",
                   help=f"name of the --baseline system in the results "
                        f"(default {DEFAULT_BASELINE_NAME})")
    args = p.parse_args()
    for given in (args.slotgate, args.baseline):  # named explicitly: must exist
        if given and not os.access(given, os.X_OK):
            p.error(f"{given} is not an executable file")
    args.slotgate = os.path.abspath(args.slotgate or SLOTGATE)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        if args.baseline_name in SYSTEMS or not re.fullmatch(r"[\w.-]+", args.baseline_name):
            p.error(f"--baseline-name must be a plain name other than {', '.join(SYSTEMS)}")
    if args.quick:
        args.reps, args.requests = 1, QUICK_REQUESTS
    if args.reps < 1 or args.requests < 1000:
        p.error("--reps must be >= 1 and --requests >= 1000")
    return args


def workloads_for(requests):
    # Multiples of PIPELINE so that redis-benchmark sends exactly the requested count.
    p1 = requests - requests % PIPELINE
    p16 = 4 * p1
    return [Workload("P1-GET", "get", 1, p1), Workload("P1-SET", "set", 1, p1),
            Workload(f"P{PIPELINE}-GET", "get", PIPELINE, p16),
            Workload(f"P{PIPELINE}-SET", "set", PIPELINE, p16)]


def start_systems(procs, notes, args):
    """All systems in round order: slotgate, the baseline (with --baseline), twemproxy,
    direct. A slotgate or baseline that cannot start is skipped."""
    backends = [start_redis(procs, f"redis-{i}") for i in range(3)]
    direct_port, direct_proc = backends[0]
    systems = []
    slotgates = [("slotgate", args.slotgate)]
    if args.baseline:
        slotgates.append((args.baseline_name, args.baseline))
    for name, binary in slotgates:
        try:
            systems.append(start_slotgate_sharded(procs, binary, backends, name) if args.sharded
                           else start_slotgate(procs, binary, name))
        except (BenchError, subprocess.TimeoutExpired) as e:
            notes.append(" ".join(f"{name} skipped: {e}".split()))
            print(f"{name} skipped: {e}", flush=True)
    systems.append(start_twemproxy(procs, backends))
    systems.append(System("direct", direct_port, direct_proc.pid, [], [direct_port],
                          moves_to_sut_cpu=True))
    return systems


def main():
    args = parse_args()
    check_tools()
    started = datetime.datetime.now()
    out_dir = os.path.abspath(args.out or os.path.join(
        REPO, "results", "bench-core-" + started.strftime("%Y%m%d-%H%M%S")))
    workloads = workloads_for(args.requests)
    notes = []
    load = os.getloadavg()
    if load[0] > 1.0:
        notes.append(f"the machine was busy at start (load {load[0]:.2f}): expect noise; "
                     "ratios from the same run remain comparable")
    if args.sharded:
        notes.append("slotgate ran as `proxy --nutcracker` from twemproxy's own pool file, "
                     "over the same three standalone servers")
    syscall_problem = perf_problem()
    if syscall_problem:
        notes.append(f"syscalls not counted: {syscall_problem}")
    meta = {
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "machine": machine_info(),
        "git": command_output(["git", "-C", REPO, "describe", "--always", "--dirty"]),
        "versions": {"redis-server": command_output(["redis-server", "--version"]),
                     "nutcracker": command_output(["nutcracker", "--version"]),
                     "slotgate": command_output([args.slotgate, "--version"])},
        "loadavg_start": load, "reps": args.reps,
        "requests": {w.mode: w.requests for w in workloads},
        "clients": CLIENTS, "keyspace": KEYSPACE, "value_size": VALUE_SIZE,
        "nutcracker_mbuf": NUTCRACKER_MBUF, "notes": notes,
    }
    baseline = args.baseline_name if args.baseline else None
    if baseline:
        meta["slotgate_binary"] = args.slotgate
        meta["baseline"] = {"name": baseline, "binary": args.baseline}
        meta["versions"][baseline] = command_output([args.baseline, "--version"])
    os.sched_setaffinity(0, {LOADGEN_CPU})
    workdir = tempfile.mkdtemp(prefix="bench-core-")
    procs = Processes(workdir)
    runs = []
    try:
        systems = start_systems(procs, notes, args)
        meta["pinning"] = {"redis-benchmark": str(LOADGEN_CPU), "this script": str(LOADGEN_CPU)}
        for s in systems:
            meta["pinning"][s.name] = allowed_cpus(s.sut_pid) + (
                f" ({SUT_CPU} during its runs)" if s.moves_to_sut_cpu else "")
            if s.backend_pids:
                meta["pinning"][f"{s.name} backends"] = ",".join(
                    sorted({allowed_cpus(p) for p in s.backend_pids}))
        for s in systems:
            print(f"prepopulating {KEYSPACE} keys through {s.name} (port {s.port})", flush=True)
            try:
                prepopulate(s)
            except BenchError as e:
                s.failed = " ".join(f"prepopulation: {e}".split())
                print(f"  {s.name} FAILED, dropped from the benchmark: {e}", flush=True)
        run_round(systems, workloads, "warmup", 0, workdir, runs)
        for rep in range(1, args.reps + 1):
            run_round(systems, workloads, "rep", rep, workdir, runs)
        if not syscall_problem:
            run_round(systems, workloads, "syscalls", 0, workdir, runs)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the clean-up finish
        procs.close()
        shutil.rmtree(workdir, ignore_errors=True)
    meta["loadavg_end"] = os.getloadavg()
    meta["duration_s"] = round((datetime.datetime.now() - started).total_seconds(), 1)
    notes += [f"{s.name} dropped: {s.failed}" for s in systems if s.failed]
    rows, ratios = summarize(runs, systems, workloads, baseline)
    notes += unequal_load_notes(rows, baseline)
    table = markdown(meta, rows, ratios)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("# bench-core\n\n" + table)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "summary": rows, "ratios": ratios,
                   "runs": [asdict(r) for r in runs]}, f, indent=1)
    if args.update_benchmarks_md:
        update_benchmarks_md(table, out_dir)
    print("\n" + table)
    print(f"results: {out_dir} ({meta['duration_s']:.0f}s)")


def raise_interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    # Explicit, as a shell may start a background job with SIGINT ignored.
    signal.signal(signal.SIGINT, raise_interrupt)
    signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        main()
    except BenchError as e:
        sys.exit(f"bench_core: {e}")
    except KeyboardInterrupt:
        sys.exit("bench_core: interrupted; every process it started has been stopped")

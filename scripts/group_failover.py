#!/usr/bin/env python3
"""A proxy group of 3 under a cluster-aware client, and one proxy killed (docs/group.md).

Starts one local Redis Cluster (3 masters, 1 replica each) and three debug proxies as
processes, each configured with the same [group] peers, waits until each advertises the
three, then runs compat/java/GroupFailover.java: JedisCluster under load, one proxy killed
with SIGKILL, error count and recovery time recorded, load spread checked from each
proxy's INFO stats. Run by `make compat` (about 30 s once the Java classpath is cached by
scripts/install-compat-deps).

    python3 scripts/group_failover.py [--threads 12] [--after-ms 8000]
    python3 scripts/group_failover.py --client go [--reload-ms 1000]   # go-redis: numbers only

Exit status 1 when a check failed; the last line is the summary.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from slotgate_tools.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAVA = os.path.join(ROOT, "compat", "java")
GO = os.path.join(ROOT, "compat", "go")
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
if not os.path.exists(BIN) and os.environ.get("CARGO_TARGET_DIR"):
    BIN = os.path.join(os.environ["CARGO_TARGET_DIR"], "debug", "slotgate")
MEMBERS = 3
RUN_TIMEOUT_S = 180


def redis_cli(addr, *args):
    host, port = addr.rsplit(":", 1)
    out = subprocess.run(["redis-cli", "-h", host, "-p", port, *args],
                         capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


def wait_for(what, condition, ceiling=30):
    deadline = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"still not true after {ceiling}s: {what}")
        time.sleep(0.1)


class Group:
    """The cluster and the proxies; `stop` tears down whatever was started."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slotgate-group-")
        self.cluster_up = False
        self.procs = []
        self.addrs = []

    def start(self):
        out = subprocess.run(
            [BIN, "cluster", "up", "--masters", "3", "--replicas", "1", "--dir", self.dir],
            capture_output=True, text=True, timeout=120)
        self.cluster_up = True
        if out.returncode != 0:
            raise RuntimeError(f"cluster up failed: {out.stdout}{out.stderr}")
        seed = re.search(r"^seed: (\S+)", out.stdout, re.M).group(1)
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(MEMBERS)]
        peers = ", ".join(f'"{a}"' for a in self.addrs)
        for i, addr in enumerate(self.addrs):
            conf = os.path.join(self.dir, f"proxy{i}.toml")
            with open(conf, "w") as f:
                f.write(f'[proxy]\nlisten = "{addr}"\nthreads = 1\n\n'
                        f'[cluster]\nseeds = ["{seed}"]\n\n[group]\npeers = [{peers}]\n')
            log = open(os.path.join(self.dir, f"proxy{i}.log"), "w")
            self.procs.append(subprocess.Popen(
                [BIN, "proxy", "--config", conf], stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ, RUST_LOG="warn")))
        for addr in self.addrs:
            wait_for(f"{addr} answers PING", lambda a=addr: redis_cli(a, "PING") == "PONG")
        for addr in self.addrs:
            wait_for(f"{addr} advertises {MEMBERS} members",
                     lambda a=addr: len(redis_cli(a, "CLUSTER", "NODES").splitlines()) == MEMBERS)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        if self.cluster_up:
            subprocess.run([BIN, "cluster", "down", "--dir", self.dir],
                           capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def client_env(group, args):
    victim = 1  # any member; the middle one owns the middle third of the slots
    return dict(os.environ, GROUP_PROXIES=",".join(group.addrs),
                GROUP_VICTIM=group.addrs[victim], GROUP_VICTIM_PID=str(group.procs[victim].pid),
                GROUP_THREADS=str(args.threads), GROUP_WARMUP_MS=str(args.warmup_ms),
                GROUP_AFTER_MS=str(args.after_ms), GROUP_RELOAD_MS=str(args.reload_ms))


def run_go(group, args):
    """go-redis ClusterClient: prints its numbers; only a crash fails."""
    subprocess.run(["go", "build", "-mod=readonly", "-o", "compat-go-group", "./group"],
                   cwd=GO, check=True, timeout=RUN_TIMEOUT_S)
    out = subprocess.run(["./compat-go-group"], cwd=GO, env=client_env(group, args),
                         capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(out.stderr[-1500:] + out.stdout)
    return out.returncode


def run_client(group, args):
    if args.client == "go":
        return run_go(group, args)
    cp_file = os.path.join(JAVA, "target", "classpath.txt")
    if not os.path.exists(cp_file):
        raise RuntimeError("no compat/java/target/classpath.txt: run scripts/install-compat-deps")
    cp = open(cp_file).read().strip()
    classes = os.path.join(JAVA, "target", "group-classes")
    subprocess.run(["javac", "-Xlint:-options", "-d", classes, "-cp", cp, "GroupFailover.java"],
                   cwd=JAVA, check=True, timeout=RUN_TIMEOUT_S)
    out = subprocess.run(["java", "-cp", f"{classes}:{cp}", "GroupFailover"], cwd=JAVA,
                         env=client_env(group, args), capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stdout.write(out.stderr[-3000:])
    return out.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=12)
    ap.add_argument("--warmup-ms", type=int, default=3000)
    ap.add_argument("--after-ms", type=int, default=8000)
    ap.add_argument("--client", choices=["jedis", "go"], default="jedis")
    ap.add_argument("--reload-ms", type=int, default=0,
                    help="go-redis ClusterStateReloadInterval (0: its default)")
    args = ap.parse_args()
    started = time.monotonic()
    group = Group()
    rc = 1
    try:
        group.start()
        rc = run_client(group, args)
    except Exception as e:  # noqa: BLE001 - a setup failure is a failed run
        print(f"FAIL jedis/group/setup: {type(e).__name__}: {e}", flush=True)
    finally:
        group.stop()
    print(f"group_failover: {'ok' if rc == 0 else 'FAILED'} in {time.monotonic() - started:.1f}s",
          flush=True)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""The differential test's environment: the reference (a standalone redis-server), a local
3-master 1-replica cluster (`slotgate cluster up`) and `slotgate proxy` in front of it, on
free ports, started and torn down (also on failure), and the chaos thread when asked for."""

import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from slotgate_tools.ports import free_port

from .chaos import Chaos
from .common import BIN, ROOT, log
from .conn import Closed, Conn, Timeout
from .run import Target


def wait_ping(addr, proc, what, seconds=20):
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early (status {proc.returncode})")
        try:
            c = Conn(addr, timeout=1)
            f = c.call("PING")
            c.close()
            if f == ("+", b"PONG"):
                return
        except (OSError, Timeout, Closed):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer PING within {seconds} s")
        time.sleep(0.1)


class Env:
    def __init__(self, cluster_config=(), sharded=False, near_cache=False, routes=False):
        # `NAME=VALUE` directives for every cluster node (`cluster up --config`).
        self.cluster_config = list(cluster_config)
        # Three standalone servers as a nutcracker-style pool (`[sharded]`) instead of a
        # cluster: docs/nutcracker.md's mode, held to the same oracle.
        self.sharded = sharded
        # With it, key-prefix routes (`[[routes]]`) over the same three servers.
        self.routes = routes
        # `[near_cache]` on for every key: GETs answered from the proxy's cache are held
        # to the same oracle (docs/hotkeys.md).
        self.near_cache = near_cache
        self.servers = []
        self.dir = tempfile.mkdtemp(prefix="slotgate-difftest-")
        self.cdir = os.path.join(self.dir, "cluster")
        self.refproc = self.proxyproc = None
        self.cluster_up = False
        self.chaos = None
        self.faults = None
        self.lock = threading.Lock()
        self.stopped = False

    def start(self, chaos_failover_every):
        if not os.path.exists(BIN):
            log(f"difftest: {BIN} missing, running cargo build -p slotgate")
            subprocess.run(["cargo", "build", "-p", "slotgate"], cwd=ROOT, check=True)
        refdir = os.path.join(self.dir, "ref")
        os.makedirs(refdir)
        rport = free_port()
        self.refproc = subprocess.Popen(
            [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(rport),
             "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", refdir, "--logfile", os.path.join(refdir, "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        raddr = ("127.0.0.1", rport)
        if self.sharded:
            return self.start_sharded(raddr, chaos_failover_every)
        config = [arg for c in self.cluster_config for arg in ("--config", c)]
        out = subprocess.run([BIN, "cluster", "up", "--masters", "3", "--replicas", "1",
                              "--dir", self.cdir] + config, capture_output=True, text=True,
                             timeout=120)
        self.cluster_up = True
        if out.returncode != 0:
            raise RuntimeError(f"cluster up failed: {out.stdout}{out.stderr}")
        get = lambda k: re.search(rf"^{k}: ?(.*)$", out.stdout, re.M)  # noqa: E731
        if not get("seed") or not get("masters"):
            raise RuntimeError(f"cannot parse cluster up output: {out.stdout}")
        self.seed = get("seed").group(1).strip()
        self.masters = get("masters").group(1).split()
        self.replicas = (get("replicas").group(1) if get("replicas") else "").split()
        self.nodes = self.masters + self.replicas
        pport = free_port()
        self.proxy_log = os.path.join(self.dir, "proxy.log")
        args = ["--listen", f"127.0.0.1:{pport}", "--seed", self.seed, "--threads", "2"]
        if self.near_cache:
            conf = os.path.join(self.dir, "proxy.toml")
            with open(conf, "w") as f:
                f.write(f'[proxy]\nlisten = "127.0.0.1:{pport}"\nthreads = 2\n'
                        f'[cluster]\nseeds = ["{self.seed}"]\n'
                        '[near_cache]\nenabled = true\npatterns = ["*"]\n')
            args = ["--config", conf]
        with open(self.proxy_log, "w") as logf:
            self.proxyproc = subprocess.Popen(
                [BIN, "proxy"] + args,
                stdout=logf, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG=os.environ.get("DIFFTEST_PROXY_LOG", "warn")))
        wait_ping(raddr, self.refproc, "reference redis-server")
        wait_ping(("127.0.0.1", pport), self.proxyproc, "proxy")
        self.ref = Target("reference", raddr)
        self.proxy = Target("proxy", ("127.0.0.1", pport), retry_s=30)
        self.failover_every = chaos_failover_every

    def log_near_cache(self):
        """The cache's counters, so a run shows how many GETs it answered."""
        try:
            c = Conn(self.proxy.addr, timeout=5)
            frame = c.call("INFO", "stats")
            c.close()
        except (OSError, Timeout, Closed):
            return
        text = frame[1].decode(errors="replace") if isinstance(frame[1], bytes) else ""
        lines = [x.strip() for x in text.splitlines() if x.startswith("near_cache_")]
        log("difftest: " + " ".join(lines))

    def start_sharded(self, raddr, chaos_failover_every):
        """Three standalone servers, and the proxy over them as a `[sharded]` pool with the
        `{}` hash tag, so a script's tagged keys share a server as they share a slot."""
        self.masters = []
        for i in range(3):
            port = free_port()
            sdir = os.path.join(self.dir, f"server{i}")
            os.makedirs(sdir)
            self.servers.append(subprocess.Popen(
                [os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port),
                 "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", sdir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.masters.append(f"127.0.0.1:{port}")
        self.replicas, self.nodes, self.seed = [], list(self.masters), self.masters[0]
        for addr in self.masters:
            host, port = addr.rsplit(":", 1)
            wait_ping((host, int(port)), self.servers[-1], f"server {addr}")
        pport = free_port()
        conf = os.path.join(self.dir, "proxy.toml")
        with open(conf, "w") as f:
            f.write(f'[proxy]\nlisten = "127.0.0.1:{pport}"\nthreads = 2\n[sharded]\n'
                    'hash_tag = "{}"\nservers = [' +
                    ", ".join(f'"{a}:1"' for a in self.masters) + "]\n")
            if self.routes:
                f.write(self.route_table())
        self.proxy_log = os.path.join(self.dir, "proxy.log")
        with open(self.proxy_log, "w") as logf:
            self.proxyproc = subprocess.Popen(
                [BIN, "proxy", "--config", conf], stdout=logf, stderr=subprocess.STDOUT,
                env=dict(os.environ, RUST_LOG=os.environ.get("DIFFTEST_PROXY_LOG", "warn")))
        wait_ping(raddr, self.refproc, "reference redis-server")
        wait_ping(("127.0.0.1", pport), self.proxyproc, "proxy")
        self.ref = Target("reference", raddr)
        self.proxy = Target("proxy", ("127.0.0.1", pport), retry_s=30)
        self.failover_every = chaos_failover_every

    def route_table(self):
        """Routes for the generator's key families (gen.py): tagged families to pools of
        their own (one tag, one server, as one slot), strings and hashes to pools that share
        servers with the catch-all and with each other, the longest prefix winning over `s`."""
        m = self.masters
        routes = [("{a}", [m[1], m[2]], "md5"), ("{b}", [m[2]], ""), ("s", [m[0], m[1]], "murmur"),
                  ("s0", [m[2]], ""), ("h", [m[1]], "")]
        out = ""
        for prefix, servers, hash_fn in routes:
            out += (f'[[routes]]\nprefix = "{prefix}"\n[routes.pool]\nhash_tag = "{{}}"\n'
                    f'hash = "{hash_fn}"\nservers = [' +
                    ", ".join(f'"{a}:1"' for a in servers) + "]\n")
        return out

    def start_chaos(self, seed):
        if self.chaos is None:
            self.chaos = Chaos(self, self.failover_every, seed)
            self.chaos.start()

    def stop_chaos(self):
        if self.chaos is not None:
            self.chaos.stop()
            c, self.chaos = self.chaos, None
            return c
        return None

    def proxy_alive(self):
        return self.proxyproc is not None and self.proxyproc.poll() is None

    def log_tail(self, n=3000):
        try:
            with open(self.proxy_log, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        with self.lock:
            if self.stopped:
                return
            self.stopped = True
        if self.chaos is not None:
            self.chaos.stop_ev.set()
        if self.faults is not None:
            self.faults.stop_ev.set()
            self.faults.teardown()
        if self.near_cache and self.proxyproc is not None and self.proxyproc.poll() is None:
            self.log_near_cache()
        for p in (self.proxyproc, self.refproc, *self.servers):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        if self.cluster_up:
            try:
                subprocess.run([BIN, "cluster", "down", "--dir", self.cdir],
                               capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                log(f"difftest: cluster down failed: {e}")
        if os.environ.get("DIFFTEST_PROXY_LOG"):
            shutil.copy(self.proxy_log, os.environ.get("DIFFTEST_KEEP_LOG", "/tmp/difftest-proxy.log"))
        shutil.rmtree(self.dir, ignore_errors=True)

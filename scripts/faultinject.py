"""Random hard faults for the soak (`scripts/difftest.py --faults`, `make soak FAULTS=1`).

Every few seconds one fault of reliability.md §C hits a real node of the cluster behind the
proxy: `kill -9` of a master and its restart with its nodes.conf (F1, F9), SIGSTOP/SIGCONT of
a master past or within the node timeout (F2), `CLIENT KILL` of every client of a master,
the proxy's backend connections among them (F10), or `CLUSTER FAILOVER` on a replica (F7).
After each it waits until every node reports `cluster_state:ok` and all agree on the slot
owners (a deadline: not converging is a failure), then keeps a short quiet margin. Scripts
of the differential test that overlapped a fault window may differ from the reference
(unknown outcomes, Redis's own loss of unreplicated writes); every other script must not.
The proxy's open file descriptors and RSS are read from /proc before and after.

Python 3 standard library only.
"""

import os
import random
import signal
import subprocess
import threading
import time

from slotgate_tools.resp import Conn, RespError

CONVERGE_S = 60
QUIET_S = 2.0


class RedisError(Exception):
    pass


def call(addr, *args, timeout=5.0):
    """One command on a fresh connection; the reply as bytes/int/list, errors raised."""
    host, port = addr.rsplit(":", 1)
    with Conn(int(port), host, timeout=timeout, text=False) as c:
        c.send(*args)
        reply = c.read()
    if isinstance(reply, RespError):
        raise RedisError(str(reply))
    return reply


def proc_stats(pid):
    """(open fds, RSS in kB) of a process."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status") as st:
            rss = next(int(line.split()[1]) for line in st if line.startswith("VmRSS:"))
        return fds, rss
    except (OSError, StopIteration, ValueError):
        return -1, -1


def peers(pid):
    """The process's established TCP connections by remote port (`ss`), for a growth hunt."""
    try:
        out = subprocess.run(["ss", "-Htnp", "state", "established"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    counts = {}
    for line in out.splitlines():
        if f"pid={pid}," in line:
            peer = line.split()[3].rsplit(":", 1)[-1]
            counts[peer] = counts.get(peer, 0) + 1
    return dict(sorted(counts.items()))


class Faults(threading.Thread):
    KINDS = ("kill", "stop", "clientkill", "failover")

    def __init__(self, nodes, every=8.0, seed=0, log=print):
        super().__init__(daemon=True)
        self.nodes = list(nodes)  # client addresses "host:port" of every node
        self.every = every
        self.r = random.Random(seed)
        self.log = log
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.windows = []  # (start, end or None)
        self.counts = {k: 0 for k in self.KINDS}
        self.errors = []
        self.restarted = []  # Popen of nodes we restarted: ours to stop at teardown
        self.paused = set()

    # ---- what the checker asks

    def overlaps(self, t0, t1):
        with self.lock:
            return any(s < t1 and (e is None or e > t0) for s, e in self.windows)

    # ---- the loop

    def run(self):
        while not self.stop_ev.wait(self.r.uniform(0.5, 1.5) * self.every):
            kind = self.r.choice(self.KINDS)
            with self.lock:
                self.windows.append((time.monotonic(), None))
            try:
                getattr(self, "do_" + kind)()
                self.counts[kind] += 1
                self.converge()
            except Exception as e:  # noqa: BLE001 - report, repair, go on
                self.errors.append(f"{kind}: {type(e).__name__}: {e}")
                self.log(f"faults: {kind} failed: {e}")
                self.resume_all()
                try:
                    self.converge()
                except Exception as e2:  # noqa: BLE001
                    self.errors.append(f"converge: {e2}")
            time.sleep(QUIET_S)
            with self.lock:
                self.windows[-1] = (self.windows[-1][0], time.monotonic())

    def stop(self):
        self.stop_ev.set()
        self.join(CONVERGE_S * 3)
        self.resume_all()

    def teardown(self):
        """Kill the nodes we restarted (`cluster down` knows only the original pids)."""
        self.resume_all()
        for p in self.restarted:
            if p.poll() is None:
                p.kill()
                p.wait(5)

    # ---- cluster state

    def view(self, addr):
        """[(id, addr, flags, master_id, slots)] as `addr` sees it."""
        text = call(addr, "CLUSTER", "NODES").decode()
        out = []
        for line in text.strip().splitlines():
            p = line.split()
            out.append((p[0], p[1].split("@")[0], p[2].split(","), p[3], p[8:]))
        return out

    def live(self):
        return [a for a in self.nodes if self.answers(a)]

    def answers(self, addr):
        try:
            call(addr, "PING", timeout=1)
            return True
        except (OSError, RedisError):
            return False

    def masters(self):
        for a in self.live():
            try:
                return [(n[0], n[1]) for n in self.view(a)
                        if "master" in n[2] and "fail" not in n[2] and n[4]]
            except (OSError, RedisError):
                continue
        raise RedisError("no node answers")

    def replicas(self):
        a = self.live()[0]
        return [n[1] for n in self.view(a) if "slave" in n[2] and "fail" not in n[2]]

    def converge(self):
        deadline = time.monotonic() + CONVERGE_S
        while True:
            try:
                if self.converged():
                    return
            except (OSError, RedisError):
                pass
            if time.monotonic() > deadline:
                raise RedisError(f"topology did not converge within {CONVERGE_S} s")
            time.sleep(0.2)

    def converged(self):
        seen = None
        for a in self.nodes:
            if b"cluster_state:ok" not in call(a, "CLUSTER", "INFO"):
                return False
            owners = sorted((tuple(n[4]), n[1]) for n in self.view(a) if "master" in n[2]
                            and n[4])
            if seen is not None and owners != seen:
                return False
            seen = owners
            info = call(a, "INFO", "replication")
            if b"role:slave" in info and b"master_link_status:up" not in info:
                return False
        return True

    def pid_dir(self, addr):
        pid = int(call(addr, "INFO", "server").split(b"process_id:")[1].split(b"\r\n")[0])
        d = call(addr, "CONFIG", "GET", "dir")[1].decode()
        return pid, d

    # ---- the faults

    def do_kill(self):
        _, addr = self.r.choice(self.masters())
        pid, d = self.pid_dir(addr)
        slots = next(n[4] for n in self.view(addr) if n[1] == addr)
        os.kill(pid, signal.SIGKILL)
        self.log(f"faults: kill -9 {addr}")
        # Its replica is promoted (another node serves its slots); then the old master comes
        # back, with its nodes.conf, as that node's replica.
        others = [a for a in self.nodes if a != addr]
        deadline = time.monotonic() + CONVERGE_S
        while not any(n[1] != addr and n[4] == slots and "master" in n[2]
                      for n in self.view_of(others)):
            if time.monotonic() > deadline:
                raise RedisError(f"no failover of {addr}")
            time.sleep(0.2)
        self.restarted.append(subprocess.Popen(
            [os.environ.get("REDIS_SERVER", "redis-server"), os.path.join(d, "redis.conf")], cwd=d,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def view_of(self, addrs):
        for a in addrs:
            try:
                return self.view(a)
            except (OSError, RedisError):
                continue
        return []

    def do_stop(self):
        _, addr = self.r.choice(self.masters())
        pid, _ = self.pid_dir(addr)
        hold = self.r.choice([0.5, 1.0, 3.0, 5.0])  # within and past the 2 s node timeout
        os.kill(pid, signal.SIGSTOP)
        self.paused.add(pid)
        self.log(f"faults: SIGSTOP {addr} for {hold} s")
        time.sleep(hold)
        os.kill(pid, signal.SIGCONT)
        self.paused.discard(pid)

    def resume_all(self):
        for pid in list(self.paused):
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
            self.paused.discard(pid)

    def do_clientkill(self):
        _, addr = self.r.choice(self.masters())
        n = call(addr, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        self.log(f"faults: CLIENT KILL TYPE normal on {addr}: {n} connections")

    def do_failover(self):
        reps = self.replicas()
        if not reps:
            return
        addr = self.r.choice(reps)
        call(addr, "CLUSTER", "FAILOVER")
        self.log(f"faults: CLUSTER FAILOVER on {addr}")

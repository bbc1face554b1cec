"""Chaos for the differential test (`--chaos`): live slot migration (key by key, or the
servers' atomic migration where they have it) and graceful failovers, run on the cluster
behind the proxy while scripts run, with the record of which slots changed owner when, for
the differences chaos may cause by design (compare.py)."""

import collections
import random
import re
import threading
import time

from slotgate_tools.resp import ProtocolError

from .compare import fmt
from .conn import Closed, Conn, Timeout
from .gen import ALL_KEYS
from .script import key_slot


def split_addr(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class RedisErr(Exception):
    pass


# Held by the chaos thread around each MIGRATE and by the harness around its FLUSHALL
# between scripts: a key MIGRATE has read on the source but not yet restored on the target
# would otherwise outlive the flush (restored after it), and show up in the next script.
# That race is the harness's own (its reset against its own chaos), not the proxy's.
FLUSH_GUARD = threading.Lock()


class Chaos(threading.Thread):
    def __init__(self, env, failover_every=15.0, seed=0):
        super().__init__(daemon=True)
        self.env = env
        self.slots = sorted({key_slot(k) for k in ALL_KEYS})
        self.failover_every = failover_every
        self.stop_ev = threading.Event()
        self.conns = {}
        self.r = random.Random(seed)
        self.moves = self.failovers = self.errors = self.atomic_moves = 0
        self.atomic = None  # atomic_kind(), probed once
        self.last_error = ""
        # (start, end, slots or None for every slot): owner changes, for watch_lost_to_chaos.
        self.events = collections.deque(maxlen=4096)
        # (start, slots or None): the change under way, which a script may meet before it
        # is done (a failover takes seconds; its event is appended only at the end).
        self.ongoing = None

    def call(self, addr, *args):
        try:
            if addr not in self.conns:
                self.conns[addr] = Conn(split_addr(addr), timeout=10)
            f = self.conns[addr].call(*args)
        except (OSError, Timeout, Closed, ProtocolError) as e:
            c = self.conns.pop(addr, None)
            if c:
                c.close()
            raise RedisErr(f"{addr}: {e}") from None
        if f[0] == "-":
            raise RedisErr(f"{addr} {args[0]} {args[1] if len(args) > 1 else ''}: {fmt(f)}")
        return f

    def nodes(self, addr=None):
        """CLUSTER NODES as seen by addr (or the first node that answers)."""
        for a in ([addr] if addr else self.env.nodes):
            try:
                text = self.call(a, "CLUSTER", "NODES")[1].decode()
                break
            except RedisErr:
                continue
        else:
            raise RedisErr("no node answers CLUSTER NODES")
        out = []
        for line in text.strip().splitlines():
            p = line.split()
            n = dict(id=p[0], addr=p[1].split("@")[0], flags=p[2].split(","), master=p[3],
                     slots=p[8:])
            out.append(n)
        return out

    def run(self):
        next_failover = time.monotonic() + self.failover_every * self.r.uniform(0.3, 1.0)
        while not self.stop_ev.is_set():
            try:
                t0 = time.monotonic()
                if self.failover_every > 0 and t0 > next_failover:
                    self.ongoing = (t0, None)
                    try:
                        self.failover()
                    finally:
                        self.events.append((t0, time.monotonic() + 2.0, None))
                        self.ongoing = None
                    next_failover = time.monotonic() + self.failover_every
                else:
                    self.migrate_one()
            except Exception as e:  # noqa: BLE001 - keep going, and repair
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"
                if self.stop_ev.wait(0.5):
                    break
                try:
                    self.repair()
                except Exception as e2:  # noqa: BLE001
                    self.last_error += f"; repair: {e2}"
            self.stop_ev.wait(self.r.uniform(0.05, 0.3))

    def changed(self, t0, t1, slots):
        """Whether an owner of one of `slots` changed (or a failover ran) in [t0, t1], or
        such a change is under way."""
        ongoing = self.ongoing
        if ongoing and ongoing[0] <= t1 and (ongoing[1] is None or ongoing[1] & slots):
            return True
        return any(a <= t1 and b >= t0 and (s is None or s & slots)
                   for a, b, s in list(self.events))

    def owners(self, nodes):
        masters = {n["id"]: n for n in nodes if "master" in n["flags"] and "fail" not in n["flags"]}
        owner = {}
        for n in masters.values():
            for tok in n["slots"]:
                if tok.startswith("["):
                    continue
                a, _, b = tok.partition("-")
                for s in range(int(a), int(b or a) + 1):
                    owner[s] = n["id"]
        return masters, owner

    def atomic_kind(self):
        """The servers' atomic slot migration: "valkey" (9.0's CLUSTER MIGRATESLOTS, run on
        the source), "redis" (8.4's CLUSTER MIGRATION IMPORT, run on the target) or None."""
        if self.atomic is None:
            self.atomic = ""
            probes = (("valkey", ("CLUSTER", "GETSLOTMIGRATIONS")),
                      ("redis", ("CLUSTER", "MIGRATION", "STATUS", "ALL")))
            for kind, args in probes:
                try:
                    self.call(self.env.nodes[0], *args)
                    self.atomic = kind
                    break
                except RedisErr:
                    continue
        return self.atomic or None

    def migrate_one(self):
        masters, owner = self.owners(self.nodes())
        slot = self.r.choice(self.slots)
        src = masters[owner[slot]]
        dst = self.r.choice([m for m in masters.values() if m["id"] != src["id"]])
        t0 = time.monotonic()
        self.ongoing = (t0, {slot})
        try:
            if self.atomic_kind() and self.r.random() < 0.5:
                self.migrate_atomic(slot, src, dst, masters)
                self.atomic_moves += 1
            else:
                self.call(dst["addr"], "CLUSTER", "SETSLOT", slot, "IMPORTING", src["id"])
                self.call(src["addr"], "CLUSTER", "SETSLOT", slot, "MIGRATING", dst["id"])
                self.stop_ev.wait(self.r.uniform(0, 0.3))  # let traffic meet MIGRATING
                self.finish(slot, src, dst, masters)
            self.moves += 1
        finally:
            # Its end, or a repair later, moves the slot's owner.
            self.events.append((t0, time.monotonic() + 2.0, {slot}))
            self.ongoing = None

    def migrate_atomic(self, slot, src, dst, masters):
        """The slot moved whole by the servers (a snapshot, then the writes streamed, then a
        short write pause and the hand-over), waited for until every master agrees. The
        harness's FLUSHALL waits for it: the stream would carry keys across the flush."""
        deadline = time.monotonic() + 30
        with FLUSH_GUARD:
            if self.atomic == "valkey":
                self.call(src["addr"], "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot,
                          "NODE", dst["id"])
            else:
                task = self.call(dst["addr"], "CLUSTER", "MIGRATION", "IMPORT", slot, slot)[1]
            while True:
                if self.atomic == "redis":
                    tasks = self.call(dst["addr"], "CLUSTER", "MIGRATION", "STATUS", "ID",
                                      task)[1]
                    fields = tasks[0][1] if tasks else []
                    status = {fields[i][1]: fields[i + 1][1] for i in range(0, len(fields), 2)}
                    if status.get(b"state") in (b"failed", b"canceled"):
                        raise RedisErr(f"slot {slot} migration {status.get(b'state')}: "
                                       f"{status.get(b'last_error')}")
                _, owner = self.owners(self.nodes(dst["addr"]))
                if owner.get(slot) == dst["id"]:
                    break
                if time.monotonic() > deadline:
                    raise RedisErr(f"atomic migration of slot {slot} did not end in 30 s")
                time.sleep(0.02)
        # The others learn the new owner by gossip; wait, so the next move starts from it.
        for m in masters.values():
            while self.owners(self.nodes(m["addr"]))[1].get(slot) != dst["id"]:
                if time.monotonic() > deadline:
                    raise RedisErr(f"{m['addr']} did not learn slot {slot}'s move in 30 s")
                time.sleep(0.02)

    def finish(self, slot, src, dst, masters):
        host, port = split_addr(dst["addr"])
        while True:
            keys = self.call(src["addr"], "CLUSTER", "GETKEYSINSLOT", slot, 50)[1]
            if not keys:
                break
            with FLUSH_GUARD:
                self.call(src["addr"], "MIGRATE", host, port, "", 0, 5000, "REPLACE", "KEYS",
                          *[k[1] for k in keys])
            self.stop_ev.wait(self.r.uniform(0, 0.05))
        self.call(dst["addr"], "CLUSTER", "SETSLOT", slot, "NODE", dst["id"])
        self.call(src["addr"], "CLUSTER", "SETSLOT", slot, "NODE", dst["id"])
        for m in masters.values():
            if m["id"] not in (src["id"], dst["id"]):
                try:
                    self.call(m["addr"], "CLUSTER", "SETSLOT", slot, "NODE", dst["id"])
                except RedisErr:
                    pass

    def repair(self):
        """Finish any migration left half-way (each master's own view of its slots)."""
        masters, _ = self.owners(self.nodes())
        for m in masters.values():
            me = next(n for n in self.nodes(m["addr"]) if "myself" in n["flags"])
            for tok in me["slots"]:
                mm = re.fullmatch(r"\[(\d+)->-([0-9a-f]+)\]", tok)
                if mm and mm.group(2) in masters:
                    self.finish(int(mm.group(1)), m, masters[mm.group(2)], masters)
                mi = re.fullmatch(r"\[(\d+)-<-([0-9a-f]+)\]", tok)
                if mi and mi.group(2) in masters:
                    self.finish(int(mi.group(1)), masters[mi.group(2)], m, masters)

    def failover(self):
        nodes = self.nodes()
        masters, _ = self.owners(nodes)
        pairs = [(masters[n["master"]], n) for n in nodes
                 if "slave" in n["flags"] and "fail" not in n["flags"] and n["master"] in masters]
        if not pairs:
            return
        old, rep = self.r.choice(pairs)
        self.call(rep["addr"], "CLUSTER", "FAILOVER")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.stop_ev.is_set():
            time.sleep(0.2)
            try:
                if self.settled(rep, old):
                    self.failovers += 1
                    return
            except Exception:  # noqa: BLE001 - views still converging
                pass
        raise RedisErr(f"failover of {old['addr']} to {rep['addr']} did not settle in 30 s")

    def settled(self, new, old):
        role = self.call(new["addr"], "ROLE")[1][0][1]
        if role != b"master":
            return False
        for a in self.env.nodes:
            if b"cluster_state:ok" not in self.call(a, "CLUSTER", "INFO")[1]:
                return False
            view = {n["id"]: n for n in self.nodes(a)}
            if "master" not in view[new["id"]]["flags"] or "slave" not in view[old["id"]]["flags"]:
                return False
        info = self.call(old["addr"], "INFO", "replication")[1]
        return b"master_link_status:up" in info

    def stop(self):
        self.stop_ev.set()
        self.join(40)
        for c in self.conns.values():
            c.close()

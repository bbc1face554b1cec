#!/usr/bin/env python3
"""Execution order through key-by-key slot migration (issue 24 item 4, docs/commands.md).

A 3-master cluster (`slotgate cluster up`) with the debug proxy in front. A migrator moves
one slot back and forth between masters the way resharding tools do, one key per MIGRATE,
10-30 ms apart (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE). Meanwhile one client
pipelines, through the proxy, rounds of

    MSET {t}k<i> m {t}o m ; SET {t}k<i> s ; GET {t}k<i>

over the keys of that slot, and checks what one Redis would answer: the GET says `s`, and
so does a later GET. An MSET that met TRYAGAIN (one of its keys already moved) must not be
overtaken by the SET behind it once the proxy has seen the slot migrating (an ASK or a
TRYAGAIN since the move began, per its INFO counters). A round the proxy could not know
about yet (its MSET's TRYAGAIN was the move's first news) is counted apart, as
docs/commands.md states.

    python3 scripts/migration_order.py [--seconds 20] [--seed N]
    python3 scripts/migration_order.py --atomic --server PATH [--seconds 20]

With --atomic, the slot moves whole, by the server's own atomic slot migration (Valkey 9's
CLUSTER MIGRATESLOTS on the source, Redis 8.4's CLUSTER MIGRATION IMPORT on the target), each
move waited for until every master agrees: there is no half-moved state to meet, so every
round must answer exactly OK OK s, then s (no error, nothing counted apart).

Prints the counts and exits 1 on any wrong value. Free ports only; tears down on exit.
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

from slotgate_tools.ports import free_port
from slotgate_tools.resp import Conn, RespError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
TAG = "{t}"
KEYS = 20  # keys of the slot besides o: each round uses one, so MSETs keep meeting moves


def call(conn, *args):
    try:
        return conn.call(*args)
    except RuntimeError as e:
        return "ERR " + str(e)


def node_ids(conn):
    out = {}
    for line in call(conn, "CLUSTER", "NODES").splitlines():
        p = line.split()
        out[p[1].split("@")[0]] = (p[0], "master" in p[2])
    return out


class Migrator(threading.Thread):
    """Moves the tag's slot between masters, one key per MIGRATE, until stopped."""

    def __init__(self, masters, slot, rng, seen):
        super().__init__(daemon=True)
        self.masters, self.slot, self.r, self.seen = masters, slot, rng, seen
        # The proxy's ASK + TRYAGAIN count when the current move began.
        self.move_mark = 0
        self.conns = {a: Conn(int(a.rsplit(":", 1)[1])) for a in masters}
        self.stop = threading.Event()
        self.moves = self.keys_moved = 0
        self.error = None

    def owner(self):
        for a, c in self.conns.items():
            if call(c, "CLUSTER", "COUNTKEYSINSLOT", self.slot) != 0 or \
                    any(r[0] <= self.slot <= r[1] and r[2][1] == int(a.rsplit(":", 1)[1])
                        for r in call(c, "CLUSTER", "SLOTS")):
                return a
        return None

    def run(self):
        try:
            ids = node_ids(next(iter(self.conns.values())))
            src = self.owner()
            while not self.stop.is_set():
                dst = self.r.choice([a for a in self.masters if a != src])
                s, d = self.conns[src], self.conns[dst]
                call(d, "CLUSTER", "SETSLOT", self.slot, "IMPORTING", ids[src][0])
                call(s, "CLUSTER", "SETSLOT", self.slot, "MIGRATING", ids[dst][0])
                self.move_mark = self.seen()
                host, port = dst.rsplit(":", 1)
                while True:
                    keys = call(s, "CLUSTER", "GETKEYSINSLOT", self.slot, 1)
                    if not keys:
                        break
                    reply = call(s, "MIGRATE", host, port, "", 0, 5000, "REPLACE", "KEYS", keys[0])
                    if isinstance(reply, str) and reply.startswith("ERR"):
                        raise RuntimeError(f"MIGRATE: {reply}")
                    self.keys_moved += 1
                    time.sleep(self.r.uniform(0.010, 0.030))
                for c in [d, s] + [self.conns[a] for a in self.masters if a not in (src, dst)]:
                    call(c, "CLUSTER", "SETSLOT", self.slot, "NODE", ids[dst][0])
                self.moves += 1
                src = dst
                self.stop.wait(self.r.uniform(0.05, 0.2))
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = f"{type(e).__name__}: {e}"


class AtomicMigrator(Migrator):
    """Moves the tag's slot between masters whole, by the servers' atomic migration."""

    def kind(self):
        c = next(iter(self.conns.values()))
        if not str(call(c, "CLUSTER", "GETSLOTMIGRATIONS")).startswith("ERR"):
            return "valkey"
        if not str(call(c, "CLUSTER", "MIGRATION", "STATUS", "ALL")).startswith("ERR"):
            return "redis"
        raise RuntimeError("the server has no atomic slot migration")

    def owned_by(self, conn, port):
        return any(r[0] <= self.slot <= r[1] and r[2][1] == port
                   for r in call(conn, "CLUSTER", "SLOTS"))

    def run(self):
        try:
            kind = self.kind()
            ids = node_ids(next(iter(self.conns.values())))
            src = self.owner()
            self.move_mark = -1  # no half-moved state: nothing is counted apart
            while not self.stop.is_set():
                dst = self.r.choice([a for a in self.masters if a != src])
                if kind == "valkey":
                    reply = call(self.conns[src], "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE",
                                 self.slot, self.slot, "NODE", ids[dst][0])
                else:
                    reply = call(self.conns[dst], "CLUSTER", "MIGRATION", "IMPORT", self.slot,
                                 self.slot)
                if isinstance(reply, str) and reply.startswith("ERR"):
                    raise RuntimeError(f"atomic migration: {reply}")
                port = int(dst.rsplit(":", 1)[1])
                deadline = time.monotonic() + 30
                while not all(self.owned_by(c, port) for c in self.conns.values()):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"slot {self.slot} did not reach {dst} in 30 s")
                    time.sleep(0.01)
                self.moves += 1
                src = dst
                self.stop.wait(self.r.uniform(0.05, 0.2))
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.error = f"{type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    ap.add_argument("--atomic", action="store_true",
                    help="move the slot with the server's atomic slot migration")
    ap.add_argument("--server", default=os.environ.get("REDIS_SERVER"),
                    help="the server binary (default: $REDIS_SERVER, else redis-server)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"migration-order: seed {args.seed}")
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "-p", "slotgate"], cwd=ROOT, check=True)
    cdir = tempfile.mkdtemp(prefix="migration-order.")
    proxy = None
    try:
        server = ["--server", args.server] if args.server else []
        out = subprocess.run([BIN, "cluster", "up", "--masters", "3", "--replicas", "0",
                              "--dir", cdir] + server, capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            sys.exit(f"cluster up failed: {out.stdout}{out.stderr}")
        seed = re.search(r"^seed: (\S+)", out.stdout, re.M).group(1)
        masters = re.search(r"^masters: (.*)$", out.stdout, re.M).group(1).split()
        pport = free_port()
        proxy = subprocess.Popen([BIN, "proxy", "--listen", f"127.0.0.1:{pport}", "--seed", seed],
                                 stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(cdir, "proxy.log"), "w"))
        deadline = time.monotonic() + 20
        while True:
            try:
                client = Conn(pport)
                if client.call("PING") == "PONG":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                sys.exit("migration-order: the proxy did not start")
            time.sleep(0.1)
        slot = client.call("CLUSTER", "KEYSLOT", TAG)
        keys = [f"{TAG}k{i}" for i in range(KEYS)]
        o = f"{TAG}o"
        for k in keys + [o]:
            client.call("SET", k, "init")
        stats = Conn(pport)

        def seen():
            text = stats.call("INFO", "stats")
            fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
            return int(fields["redirects_ask"]) + int(fields["tryagain_retries"])

        stats_lock = threading.Lock()

        def seen_locked():
            with stats_lock:
                return seen()

        migrator = (AtomicMigrator if args.atomic else Migrator)(masters, slot, rng, seen_locked)
        migrator.start()
        rounds = wrong = mset_failed = first_meeting = 0
        first_wrong = None
        end = time.monotonic() + args.seconds
        while time.monotonic() < end and migrator.error is None:
            k = rng.choice(keys)
            before = seen_locked()
            replies = ["ERR " + str(r) if isinstance(r, RespError) else r
                       for r in client.pipeline(("MSET", k, "m", o, "m"), ("SET", k, "s"),
                                                ("GET", k))]
            final = call(client, "GET", k)
            rounds += 1
            if isinstance(replies[0], str) and replies[0].startswith("ERR"):
                mset_failed += 1
                wrong += args.atomic  # a whole move leaves no state for an error to be right
                print(f"migration-order: round {rounds} on {k}: MSET answered {replies[0]!r}")
            if (replies[1:] != ["OK", "s"] or final != "s") and before <= migrator.move_mark:
                # The proxy had met no ASK or TRYAGAIN of this move yet: this MSET's TRYAGAIN
                # was the first news of it, and the requests written with it had run
                # (docs/commands.md: what the proxy cannot undo).
                first_meeting += 1
                print(f"migration-order: round {rounds} on {k}, the move's first meeting: "
                      f"{replies}, then {final!r}")
            elif replies[1:] != ["OK", "s"] or final != "s":
                wrong += 1
                first_wrong = first_wrong or (k, replies, final)
                print(f"migration-order: round {rounds} on {k} wrong: {replies}, then {final!r}")
        migrator.stop.set()
        migrator.join(timeout=30)
        how = "whole" if args.atomic else f"{migrator.keys_moved} keys moved one by one"
        print(f"migration-order: {rounds} rounds, {how} in {migrator.moves} slot moves; "
              f"{mset_failed} MSETs answered an error; "
              f"{first_meeting} overtaken at a move's first meeting (counted apart); "
              f"{wrong} wrong")
        if migrator.error:
            sys.exit(f"migration-order: the migrator failed: {migrator.error}")
        if first_wrong:
            k, replies, final = first_wrong
            print(f"migration-order: first wrong round on {k}: replies {replies}, then GET "
                  f"{final!r} (one Redis: OK OK s, then s)")
        if rounds == 0 or migrator.moves == 0:
            sys.exit("migration-order: nothing was exercised")
        sys.exit(1 if wrong else 0)
    finally:
        if proxy:
            proxy.kill()
            proxy.wait()
        subprocess.run([BIN, "cluster", "down", "--dir", cdir], capture_output=True, timeout=60)


if __name__ == "__main__":
    main()

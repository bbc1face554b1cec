#!/usr/bin/env python3
"""The server matrix: slotgate in front of each Redis and Valkey that users run.

For every server binary given (NAME=PATH; default: every one `scripts/install-servers`
cached, plus Debian's redis-server), this starts a 3-master cluster of it
(`slotgate cluster up --server PATH`), the debug proxy in front, and checks:

- the proxy learned the nodes' commands (INFO `commands_learned_from_masters:3`);
- every command and subcommand a node's `COMMAND INFO` names is known to the proxy: sent
  through it bare (the name, or container and subcommand), none is answered "unknown
  command" or "unknown subcommand" by the proxy (arity errors and the proxy's own clear
  refusals are fine; each call runs on a fresh connection);
- INFO's redis_version/valkey_version/server_name and HELLO's server/version are the
  nodes' own;
- where the nodes have it, CLUSTER SLOT-STATS (SLOTSRANGE and ORDERBY ... LIMIT) equals the
  masters' own entries merged, and MSETEX across slots is split (its TTL on every key; with
  NX or XX, CROSSSLOT);
- on Valkey 9 (started with `cluster-databases 16`): `SELECT 3; SET k v` through the proxy
  lands in database 3 of k's master, a client on database 0 does not see it, a WATCHed
  MULTI/EXEC runs in database 3, and SELECT 16 is out of range;
- on Valkey 8.1+ (started with a replica per master, masters in availability zone a,
  replicas in b): with `read_policy = "nearest"`, a proxy in zone b sends reads to the
  replicas and one in zone a to the masters.

Then, with --difftest SECONDS, the differential test (scripts/difftest.py, plain mode)
against a standalone server of the same binary, for each server but Debian's (the main
differential test of `make test` runs on that one); with --chaos SECONDS its chaos mode too
(key-by-key slot moves, the servers' atomic ones where they have them: Valkey 9's CLUSTER
MIGRATESLOTS, Redis 8.4's CLUSTER MIGRATION; failovers), and there scripts/migration_order.py
--atomic for 10 s (MSET/SET/GET pipelines while the slot moves whole).

    python3 scripts/server_matrix.py [--server valkey-9.1=/path/valkey-server ...]
                                     [--difftest 30] [--chaos 20]

Prints `ok`/`FAIL` lines and exits 1 on any failure. Free ports only; tears down on exit.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from slotgate_tools.ports import free_port
from slotgate_tools.resp import Conn, RespError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
CACHE = os.environ.get("SLOTGATE_SERVERS",
                       os.path.join(os.path.expanduser("~"), ".cache", "slotgate", "servers"))


def default_servers():
    servers = [("redis-7.0", "redis-server")]
    if os.path.isdir(CACHE):
        for name in sorted(os.listdir(CACHE)):
            path = os.path.join(CACHE, name, "server")
            if os.access(path, os.X_OK):
                servers.append((name, path))
    return servers


def call(port, *args, timeout=5):
    """One command on a fresh connection: the reply, or the error text (no exception)."""
    with Conn(port, timeout=timeout) as c:
        c.send(*args)
        try:
            reply = c.read()
        except OSError as e:
            return "CLOSED " + str(e)
        except UnicodeDecodeError:
            return "binary reply"
    return "ERR-REPLY " + str(reply) if isinstance(reply, RespError) else reply


def info_fields(text):
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def wait_for(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while True:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def valkey_major(path):
    """9 for `Valkey server v=9.1.2 ...`; 0 for Redis or an unreadable version."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.match(r"Valkey server v=(\d+)", out)
    return int(m.group(1)) if m else 0


def has_atomic_migration(path):
    """Valkey 9.0+ (CLUSTER MIGRATESLOTS) or Redis 8.4+ (CLUSTER MIGRATION)."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.match(r"(Valkey|Redis) server v=(\d+)\.(\d+)", out)
    if not m:
        return False
    version = (int(m.group(2)), int(m.group(3)))
    return version >= ((9, 0) if m.group(1) == "Valkey" else (8, 4))


def check_databases(name, pport, masters):
    """Valkey 9's numbered databases (issue 24's acceptance): `SELECT 3; SET k v` through the
    proxy lands in database 3 of k's master, and a client on database 0 does not see it."""
    key = "matrix:db"
    c3, c0 = Conn(pport), Conn(pport)
    failures = []
    if c3.call("SELECT", "3") != "OK" or c3.call("SET", key, "in-3") != "OK":
        return ["SELECT 3; SET through the proxy failed"]
    if c0.call("GET", key) is not None:
        failures.append("a client on database 0 sees the key set in database 3")
    owner = None
    for m in masters:
        node = Conn(int(m.rsplit(":", 1)[1]))
        try:
            node.call("SELECT", "3")
            got3 = node.call("GET", key)
            node.call("SELECT", "0")
            got0 = node.call("GET", key)
        except RuntimeError:  # MOVED: not the key's master
            continue
        owner = (m, got3, got0)
    if owner is None or owner[1] != "in-3" or owner[2] is not None:
        failures.append(f"the key's master holds {owner}: want in-3 in database 3 only")
    # The database follows the client onto its own connections (a transaction, a WATCH).
    c3.call("WATCH", key)
    c3.call("MULTI")
    c3.call("SET", key, "tx")
    if c3.call("EXEC") != ["OK"] or c3.call("GET", key) != "tx" or c0.call("GET", key):
        failures.append("MULTI/EXEC after SELECT 3 did not run in database 3")
    try:
        c0.call("SELECT", "16")
        failures.append("SELECT 16 of 16 databases accepted")
    except RuntimeError as e:
        if str(e) != "ERR DB index is out of range":
            failures.append(f"SELECT 16: {e}")
    c3.call("DEL", key)
    if not failures:
        print(f"ok {name}: SELECT 3 through the proxy writes database 3 of the key's master")
    return failures


def check_zones(name, path, seed, nodes):
    """Valkey 8.1's availability zones: with `read_policy = "nearest"`, a proxy in zone b
    reads from the replicas (zone b), one in zone a from the masters (zone a), whatever the
    round trips say."""
    failures = []
    for role_zone in nodes:
        Conn(int(role_zone[0].rsplit(":", 1)[1])).call("CONFIG", "SET", "availability-zone",
                                                         role_zone[1])
    for zone, want in (("b", "replica"), ("a", "master")):
        pport = free_port()
        conf = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
        conf.write(f'[proxy]\nlisten = "127.0.0.1:{pport}"\nthreads = 1\n[cluster]\n'
                   f'seeds = ["{seed}"]\nread_policy = "nearest"\n'
                   f'availability_zone = "{zone}"\n')
        conf.close()
        proxy = subprocess.Popen([BIN, "proxy", "--config", conf.name],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for("the proxy", lambda pport=pport: call(pport, "PING") == "PONG")
            # The sampler publishes each round whole: once it judged every replica usable,
            # the same round chose each shard's nearest node.
            wait_for("the replicas sampled", lambda pport=pport: call(pport, "INFO", "backends")
                     .count("state=up") == len(nodes) // 2)
            before = info_fields(call(pport, "INFO", "stats"))
            for i in range(30):
                call(pport, "GET", f"zone:{i}")
            after = info_fields(call(pport, "INFO", "stats"))
            went = {to: int(after[f"reads_nearest_{to}"]) - int(before.get(f"reads_nearest_{to}", 0))
                    for to in ("replica", "master")}
            if went[want] != 30:
                failures.append(f"proxy in zone {zone}: reads went {went}, want all 30 to "
                                f"the {want}s")
        finally:
            proxy.kill()
            proxy.wait()
            os.unlink(conf.name)
    if not failures:
        print(f"ok {name}: nearest reads stay in the proxy's availability zone")
    return failures


def check_msetex(name, pport):
    """MSETEX across slots is split by slot, each part with its own count and the options;
    with NX or XX (all keys or none) it gets CROSSSLOT."""
    keys = ["{a}m", "{b}m", "{c}m"]
    c = Conn(pport)
    got = c.call("MSETEX", "3", keys[0], "1", keys[1], "2", keys[2], "3", "EX", "100")
    values = c.call("MGET", *keys)
    ttls = [c.call("TTL", k) for k in keys]
    failures = []
    if got != 1 or values != ["1", "2", "3"] or not all(0 < t <= 100 for t in ttls):
        failures.append(f"MSETEX across slots: {got!r}, values {values}, TTLs {ttls}")
    try:
        c.call("MSETEX", "2", keys[0], "x", keys[1], "y", "NX")
        failures.append("MSETEX ... NX across slots was not refused")
    except RuntimeError as e:
        if not str(e).startswith("CROSSSLOT"):
            failures.append(f"MSETEX ... NX across slots: {e}")
    c.call("DEL", *keys)
    if not failures:
        print(f"ok {name}: MSETEX across slots split (NX/XX: CROSSSLOT)")
    return failures


def check_no_touch(name, pport, masters):
    """CLIENT NO-TOUCH ON: the client's reads leave a key's LFU counter alone (its requests go
    to connections in that mode), TOUCH still counts, OFF reads count again; flag `T`."""
    for m in masters:
        Conn(int(m.rsplit(":", 1)[1])).call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    c = Conn(pport)
    # A new key's counter is 5 and its first access always counts (LFU_INIT_VAL; later
    # ones only by chance): each check reads a key accessed for the first time.
    key, other = "matrix:no-touch", "matrix:no-touch-2"
    c.call("SET", key, "v")
    c.call("SET", other, "v")
    base = c.call("OBJECT", "FREQ", key)
    failures = []
    if c.call("CLIENT", "NO-TOUCH", "ON") != "OK":
        failures.append("CLIENT NO-TOUCH ON refused")
    flags = re.search(r"flags=(\S+)", c.call("CLIENT", "INFO")).group(1)
    c.call("GET", key)
    quiet = c.call("OBJECT", "FREQ", key)
    c.call("TOUCH", other)
    touched = c.call("OBJECT", "FREQ", other)
    c.call("CLIENT", "NO-TOUCH", "OFF")
    c.call("GET", key)
    read = c.call("OBJECT", "FREQ", key)
    c.call("DEL", key, other)
    for m in masters:
        Conn(int(m.rsplit(":", 1)[1])).call("CONFIG", "SET", "maxmemory-policy", "noeviction")
    if "T" not in flags or quiet != base or touched <= base or read <= base:
        failures.append(f"CLIENT NO-TOUCH: flags {flags}, LFU {base} -> GET {quiet} -> "
                        f"TOUCH {touched} -> GET after OFF {read}")
    else:
        print(f"ok {name}: CLIENT NO-TOUCH leaves LFU alone, TOUCH counts ({base} {quiet} "
              f"{touched} {read})")
    return failures


def check_server(name, path):
    failures = []
    cdir = tempfile.mkdtemp(prefix=f"matrix-{name}.")
    proxy = None
    numbered = valkey_major(path) >= 9
    zones = valkey_major(path) >= 8
    config = ["--config", "cluster-databases=16"] if numbered else []
    replicas = "1" if zones else "0"
    try:
        out = subprocess.run([BIN, "cluster", "up", "--masters", "3", "--replicas", replicas,
                              "--server", path, "--dir", cdir] + config, capture_output=True,
                             text=True, timeout=120)
        if out.returncode != 0:
            return [f"cluster up failed: {out.stdout}{out.stderr}"]
        seed = re.search(r"^seed: (\S+)", out.stdout, re.M).group(1)
        node_port = int(seed.rsplit(":", 1)[1])
        pport = free_port()
        proxy = subprocess.Popen([BIN, "proxy", "--listen", f"127.0.0.1:{pport}", "--seed", seed,
                                  "--threads", "1"], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(cdir, "proxy.log"), "w"))
        wait_for("the proxy", lambda: call(pport, "PING") == "PONG")
        try:
            wait_for("the proxy to learn the commands", lambda: info_fields(
                call(pport, "INFO", "topology")).get("commands_learned_from_masters") == "3")
        except RuntimeError as e:
            failures.append(str(e))

        node = Conn(node_port)
        infos = node.call("COMMAND", "INFO")
        calls = []
        for entry in infos:
            calls.append([entry[0]])
            calls += [sub[0].split("|", 1) for sub in entry[9]]
        unknown = []
        for args in calls:
            reply = call(pport, *args)
            if isinstance(reply, str) and re.match(r"ERR-REPLY ERR unknown (sub)?command", reply):
                unknown.append(" ".join(args) + " -> " + reply[len("ERR-REPLY "):])
        if unknown:
            failures.append(f"{len(unknown)} of {len(calls)} answered unknown by the proxy: "
                            + "; ".join(unknown[:10]))
        else:
            print(f"ok {name}: all {len(calls)} commands and subcommands of COMMAND INFO known")

        if any(sub[0] == "cluster|slot-stats" for e in infos for sub in e[9]):
            # Every master's slots, merged into one node's answer (route/slot_stats.rs).
            for i in range(50):
                call(pport, "SET", f"matrix:{i}", "v")
            masters = re.search(r"^masters: (.*)$", out.stdout, re.M).group(1).split()
            entries = []
            for m in masters:
                entries += Conn(int(m.rsplit(":", 1)[1])).call(
                    "CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16383")
            by_slot = sorted(entries, key=lambda e: e[0])
            got = call(pport, "CLUSTER", "SLOT-STATS", "SLOTSRANGE", "0", "16383")
            top = sorted(entries, key=lambda e: (-dict(zip(e[1][::2], e[1][1::2], strict=False))["key-count"],
                                                 e[0]))[:10]
            got_top = call(pport, "CLUSTER", "SLOT-STATS", "ORDERBY", "key-count", "LIMIT", "10")
            if got != by_slot or got_top != top:
                failures.append("CLUSTER SLOT-STATS differs from the masters' entries merged")
            else:
                print(f"ok {name}: CLUSTER SLOT-STATS merged from {len(masters)} masters")

        if any(e[0] == "msetex" for e in infos):
            failures += check_msetex(name, pport)
        masters = re.search(r"^masters: (.*)$", out.stdout, re.M).group(1).split()
        if any(sub[0] == "client|no-touch" for e in infos for sub in e[9]):
            failures += check_no_touch(name, pport, masters)

        want = info_fields(node.call("INFO", "server"))
        got = info_fields(call(pport, "INFO", "server"))
        for field in ("redis_version", "valkey_version", "server_name"):
            if want.get(field) != got.get(field):
                failures.append(f"INFO {field}: node {want.get(field)!r}, proxy {got.get(field)!r}")
        hello = call(pport, "HELLO", "3")
        hello = dict(zip(hello[::2], hello[1:][::2], strict=False)) if isinstance(hello, list) else hello
        node_hello = node.call("HELLO", "3")
        for field in ("server", "version"):
            if hello.get(field) != node_hello.get(field):
                failures.append(f"HELLO {field}: node {node_hello.get(field)!r}, "
                                f"proxy {hello.get(field)!r}")
        if not failures:
            print(f"ok {name}: INFO and HELLO say {node_hello.get('server')} "
                  f"{node_hello.get('version')}")
        masters = re.search(r"^masters: (.*)$", out.stdout, re.M).group(1).split()
        if numbered:
            failures += check_databases(name, pport, masters)
        if zones:
            replicas = re.search(r"^replicas: (.*)$", out.stdout, re.M).group(1).split()
            nodes = [(m, "a") for m in masters] + [(r, "b") for r in replicas]
            failures += check_zones(name, path, seed, nodes)
    finally:
        if proxy:
            proxy.kill()
            proxy.wait()
        subprocess.run([BIN, "cluster", "down", "--dir", cdir], capture_output=True, timeout=60)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", action="append", default=[],
                    help="NAME=PATH of a server binary (repeatable)")
    ap.add_argument("--difftest", type=int, default=0, metavar="SECONDS",
                    help="also run the plain differential test this long on each")
    ap.add_argument("--chaos", type=int, default=0, metavar="SECONDS",
                    help="and its chaos mode this long (slot moves, atomic ones where the "
                         "server has them, failovers)")
    args = ap.parse_args()
    servers = [tuple(s.split("=", 1)) for s in args.server] or default_servers()
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "-p", "slotgate"], cwd=ROOT, check=True)
    failed = 0
    for name, path in servers:
        try:
            failures = check_server(name, path)
        except Exception as e:  # one server's trouble is its failure; the others still run
            failures = [f"{type(e).__name__}: {e}"]
        for f in failures:
            print(f"FAIL {name}: {f}")
        failed += bool(failures)
        # Debian's redis-server is the main differential test's own reference already.
        if args.difftest and path != "redis-server":
            env = dict(os.environ, REDIS_SERVER=path)
            rc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "difftest.py"),
                                 "--seconds", str(args.difftest), "--quiet",
                                 "--shrink-budget", "20"], env=env).returncode
            print(f"{'ok' if rc == 0 else 'FAIL'} {name}: difftest {args.difftest} s")
            failed += rc != 0
        if args.chaos and path != "redis-server":
            env = dict(os.environ, REDIS_SERVER=path)
            rc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "difftest.py"),
                                 "--seconds", str(args.chaos), "--chaos", "--quiet",
                                 "--shrink-budget", "20"], env=env).returncode
            print(f"{'ok' if rc == 0 else 'FAIL'} {name}: difftest --chaos {args.chaos} s")
            failed += rc != 0
        if args.chaos and has_atomic_migration(path):
            # Execution order while the slot moves whole, back and forth, under a pipeline.
            rc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                              "migration_order.py"),
                                 "--atomic", "--server", path, "--seconds", "10"]).returncode
            print(f"{'ok' if rc == 0 else 'FAIL'} {name}: migration order, atomic moves, 10 s")
            failed += rc != 0
    print(f"server matrix: {len(servers)} servers, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""redis-py's plain client through slotgate, every command family compared with the master
that owns the key: the suite's reference check (compat_py.py, run by compat/run.py, checks
the values applications expect; this one checks the proxy answers as one node would).

Why here: it is the other half of the redis-py suite in compat/python/ (it was
scripts/compat_redis_py.py), sharing its pinned redis-py (requirements.txt) and checks.py.
It keeps its own entry point because it needs its own cluster: 3 masters without replicas,
each master's address to compare with, which compat/run.py's shared cluster does not give.

Starts a local 3-master Redis Cluster (`slotgate cluster up`) and the debug proxy on a
free port, then runs one check group per command family. Each check compares the proxy's
answer with the same command sent straight to the master that owns the key's slot (error
texts included). Where the proxy differs from a single node by design (cross-slot fan-out,
SCAN cursors, INFO, cluster-wide commands, the one-node CLUSTER view), the documented
behaviour (docs/commands.md) is checked instead.

Prints `ok <group>` or `FAIL <group>: <details>` per group and, last, exactly
`compat: N passed, M failed` (read by CI tooling). Exits 1 if any group failed.

    python3 compat/python/compare_masters.py      # builds target/debug/slotgate if missing
    SLOTGATE_BIN=/path/to/slotgate python3 compat/python/compare_masters.py

Needs redis-py >= 5 (`scripts/install-compat-deps` installs the pinned one) and redis-server
on PATH. Uses only free ports chosen at run time; tears everything down on exit, also on
failure.
"""

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

# compat/python/compare_masters.py -> the repository; scripts/ holds slotgate_tools.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from checks import TIMEOUT as SOCKET_TIMEOUT  # noqa: E402
from slotgate_tools.ports import free_port  # noqa: E402

try:
    import redis
except ImportError:  # pragma: no cover
    print("compat: redis-py is missing; run scripts/install-compat-deps", file=sys.stderr)
    print("compat: 0 passed, 1 failed")
    sys.exit(1)

BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
WATCHDOG_S = 150  # the whole run normally takes well under 60 s

# redis-py raises CROSSSLOT as ClusterCrossSlotError, with the code stripped from the text.
CROSSSLOT = ("error", "ClusterCrossSlotError", "Keys in request don't hash to the same slot")


def is_crossslot(e):
    return e is not None and (e[1] == "ClusterCrossSlotError" or e[2].startswith("CROSSSLOT"))


class Watchdog(Exception):
    pass


def _on_alarm(signum, frame):
    raise Watchdog(f"compat: watchdog fired after {WATCHDOG_S}s")


def _on_term(signum, frame):
    raise SystemExit(1)


# --------------------------------------------------------------------------------------
# Environment: cluster, proxy, clients.


def split_addr(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slotgate-compat-")
        self.proxy = None
        self.cluster_up = False
        self.log_path = os.path.join(self.dir, "proxy.log")

    def start(self):
        if not os.path.exists(BIN):
            print(f"compat: {BIN} missing, running cargo build -p slotgate", flush=True)
            subprocess.run(["cargo", "build", "-p", "slotgate"], cwd=ROOT, check=True)
        out = subprocess.run(
            [BIN, "cluster", "up", "--masters", "3", "--replicas", "0", "--dir", self.dir],
            capture_output=True, text=True, timeout=60,
        )
        # Mark it up before checking rc: a partial start still needs `cluster down`.
        self.cluster_up = True
        if out.returncode != 0:
            raise RuntimeError(f"cluster up failed: {out.stdout}{out.stderr}")
        seed = re.search(r"^seed: (\S+)", out.stdout, re.M)
        masters = re.search(r"^masters: (.*)$", out.stdout, re.M)
        if not seed or not masters:
            raise RuntimeError(f"cannot parse cluster up output: {out.stdout}")
        self.seed = seed.group(1)
        self.master_addrs = masters.group(1).split()
        self.port = free_port()
        env = dict(os.environ, RUST_LOG="warn")
        log = open(self.log_path, "w")
        self.proxy = subprocess.Popen(
            [BIN, "proxy", "--listen", f"127.0.0.1:{self.port}", "--seed", self.seed,
             "--threads", "2"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
        log.close()
        deadline = time.monotonic() + 20
        while True:
            if self.proxy.poll() is not None:
                raise RuntimeError(f"proxy exited early: {self.log_tail()}")
            try:
                r = redis.Redis(port=self.port, protocol=2, socket_timeout=1)
                if r.ping():
                    r.close()
                    break
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("proxy did not answer PING within 20 s")
            time.sleep(0.1)
        self.masters = {a: client_at(a) for a in self.master_addrs}
        self.slot_ranges = []  # (start, end, addr)
        any_master = next(iter(self.masters.values()))
        for entry in any_master.execute_command("CLUSTER", "SLOTS", **RAW):
            start, end, primary = entry[0], entry[1], entry[2]
            host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
            self.slot_ranges.append((int(start), int(end), f"{host}:{int(primary[1])}"))

    def stop(self):
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy.terminate()
            try:
                self.proxy.wait(5)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait(5)
        if self.cluster_up:
            subprocess.run([BIN, "cluster", "down", "--dir", self.dir],
                           capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, n=2000):
        try:
            with open(self.log_path) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    # -- helpers used by the checks --

    def proxy_client(self, protocol=2, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", SOCKET_TIMEOUT)
        return redis.Redis(host="127.0.0.1", port=self.port, protocol=protocol, **kw)

    def slot(self, key):
        m = next(iter(self.masters.values()))
        return int(m.execute_command("CLUSTER", "KEYSLOT", key))

    def owner_addr(self, key):
        s = self.slot(key)
        for start, end, addr in self.slot_ranges:
            if start <= s <= end:
                return addr
        raise RuntimeError(f"slot {s} has no owner")

    def owner(self, key):
        """The master owning `key`'s slot: the reference for a check."""
        return self.masters[self.owner_addr(key)]

    def clean(self, tag):
        """Delete every key starting with `tag` on its owner (tags keep them on one slot)."""
        m = self.owner(tag)
        keys = m.keys(tag + "*")
        if keys:
            m.delete(*keys)


RAW = {"NEVER_DECODE": True}


def client_at(addr, protocol=2, **kw):
    host, port = split_addr(addr)
    kw.setdefault("decode_responses", True)
    return redis.Redis(host=host, port=port, protocol=protocol,
                       socket_timeout=SOCKET_TIMEOUT, **kw)


def raw_conn(host, port, protocol=2):
    """A bare redis-py connection: read_response() gives replies without command callbacks."""
    c = redis.Connection(host=host, port=port, protocol=protocol, decode_responses=True,
                         socket_timeout=SOCKET_TIMEOUT)
    c.connect()
    return c


def raw_cmd(conn, *args):
    conn.send_command(*args)
    try:
        return conn.read_response()
    except redis.ResponseError as e:
        return err(e)


def err(e):
    """An error reply as comparable data: (class name, text)."""
    return ("error", type(e).__name__, str(e))


# --------------------------------------------------------------------------------------
# Check bookkeeping.


class Group:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.checks = 0

    def check(self, cond, msg):
        self.checks += 1
        if not cond:
            self.failures.append(msg)
        return cond

    def eq(self, label, got, want):
        return self.check(got == want, f"{label}: proxy={short(got)} expected={short(want)}")


def short(v, n=240):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def run_steps(client, steps):
    out = []
    for _, fn in steps:
        try:
            out.append(fn(client))
        except redis.ResponseError as e:
            out.append(err(e))
    return out


def compare(g, env, tag, steps, proxy=None):
    """Run `steps` on the owner of `tag`'s slot, then through the proxy; compare each reply."""
    ref = env.owner(tag)
    proxy = proxy or env.proxy_client()
    env.clean(tag)
    want = run_steps(ref, steps)
    env.clean(tag)
    got = run_steps(proxy, steps)
    env.clean(tag)
    for (label, _), w, p in zip(steps, want, got, strict=False):
        g.eq(label, p, w)


def errtext(fn):
    """The error `fn` raised as (error, class, text), or None if it succeeded."""
    try:
        fn()
    except redis.RedisError as e:
        return err(e)
    return None


def outcome(fn):
    """Like errtext, but a success is ("reply", value)."""
    try:
        return ("reply", fn())
    except redis.RedisError as e:
        return err(e)


# --------------------------------------------------------------------------------------
# The groups. Each takes (g, env); keys carry a hash tag per group.

GROUPS = []


def group(name):
    def register(fn):
        GROUPS.append((name, fn))
        return fn
    return register


@group("strings")
def strings(g, env):
    t = "{str}"
    k, n, big = t + "k", t + "n", t + "big"
    value = "x" * (1 << 20)
    steps = [
        ("SET", lambda c: c.set(k, "hello")),
        ("GET", lambda c: c.get(k)),
        ("SET NX", lambda c: c.set(k, "other", nx=True)),
        ("SET XX GET", lambda c: c.set(k, "hello2", xx=True, get=True)),
        ("APPEND", lambda c: c.append(k, " world")),
        ("STRLEN", lambda c: c.strlen(k)),
        ("GETRANGE", lambda c: c.getrange(k, 0, 4)),
        ("SETRANGE", lambda c: c.setrange(k, 1, "EL")),
        ("GET after SETRANGE", lambda c: c.get(k)),
        ("INCR", lambda c: c.incr(n)),
        ("INCRBY", lambda c: c.incrby(n, 41)),
        ("DECR", lambda c: c.decr(n)),
        ("INCRBYFLOAT", lambda c: c.incrbyfloat(n, 1.5)),
        ("INCR non-integer (error)", lambda c: c.incr(k)),
        ("SETEX", lambda c: c.setex(t + "ex", 100, "v")),
        ("SETEX TTL", lambda c: 95 <= c.ttl(t + "ex") <= 100),
        ("SETEX bad ttl (error)", lambda c: c.setex(t + "ex", -1, "v")),
        ("GETDEL", lambda c: c.getdel(t + "ex")),
        ("GET missing", lambda c: c.get(t + "missing")),
        ("MSET same slot", lambda c: c.mset({t + "a": "1", t + "b": "2"})),
        ("MGET same slot", lambda c: c.mget([t + "a", t + "missing", t + "b"])),
        ("MSETNX same slot", lambda c: c.msetnx({t + "a": "9", t + "c": "3"})),
        ("SET syntax error", lambda c: c.execute_command("SET", k, "v", "BOGUS")),
        ("GET wrong arity", lambda c: c.execute_command("GET")),
        ("LPUSH then GET (WRONGTYPE)",
         lambda c: (c.lpush(t + "list", "x"), errtext(lambda: c.get(t + "list")))),
        ("1 MiB value", lambda c: (c.set(big, value), c.get(big) == value)),
    ]
    compare(g, env, t, steps)


@group("hashes")
def hashes(g, env):
    t = "{hash}"
    h = t + "h"
    steps = [
        ("HSET", lambda c: c.hset(h, mapping={"f1": "v1", "f2": "v2", "n": "5"})),
        ("HGET", lambda c: c.hget(h, "f1")),
        ("HGETALL", lambda c: c.hgetall(h)),
        ("HMGET", lambda c: c.hmget(h, ["f1", "nope", "f2"])),
        ("HINCRBY", lambda c: c.hincrby(h, "n", 3)),
        ("HINCRBYFLOAT", lambda c: c.hincrbyfloat(h, "n", 0.5)),
        ("HINCRBY non-integer (error)", lambda c: c.hincrby(h, "f1", 1)),
        ("HSETNX", lambda c: c.hsetnx(h, "f1", "x")),
        ("HEXISTS", lambda c: c.hexists(h, "f2")),
        ("HSTRLEN", lambda c: c.hstrlen(h, "f2")),
        ("HKEYS", lambda c: c.hkeys(h)),
        ("HVALS", lambda c: c.hvals(h)),
        ("HDEL", lambda c: c.hdel(h, "f2", "nope")),
        ("HLEN", lambda c: c.hlen(h)),
        ("HSCAN", lambda c: c.hscan(h, 0)),
        ("HGETALL missing", lambda c: c.hgetall(t + "none")),
        ("HSET odd args (error)", lambda c: c.execute_command("HSET", h, "a")),
    ]
    compare(g, env, t, steps)


@group("lists")
def lists(g, env):
    t = "{list}"
    lk, d = t + "l", t + "d"
    steps = [
        ("RPUSH", lambda c: c.rpush(lk, "a", "b", "c", "d")),
        ("LPUSH", lambda c: c.lpush(lk, "z")),
        ("LRANGE", lambda c: c.lrange(lk, 0, -1)),
        ("LLEN", lambda c: c.llen(lk)),
        ("LINDEX", lambda c: c.lindex(lk, 2)),
        ("LINSERT", lambda c: c.linsert(lk, "BEFORE", "c", "bb")),
        ("LSET", lambda c: c.lset(lk, 0, "zz")),
        ("LSET out of range (error)", lambda c: c.lset(lk, 99, "x")),
        ("LPOS", lambda c: c.lpos(lk, "c")),
        ("LREM", lambda c: c.lrem(lk, 0, "bb")),
        ("LPOP", lambda c: c.lpop(lk)),
        ("RPOP count", lambda c: c.rpop(lk, 2)),
        ("LMOVE same slot", lambda c: c.lmove(lk, d, "LEFT", "RIGHT")),
        ("RPOPLPUSH same slot", lambda c: c.rpoplpush(lk, d)),
        ("LMPOP same slot", lambda c: c.lmpop(2, lk, d, direction="LEFT")),
        ("LTRIM", lambda c: c.ltrim(d, 0, 0)),
        ("LRANGE dest", lambda c: c.lrange(d, 0, -1)),
        ("LPOP missing", lambda c: c.lpop(t + "none")),
    ]
    compare(g, env, t, steps)


@group("sets")
def sets(g, env):
    t = "{set}"
    a, b = t + "a", t + "b"
    steps = [
        ("SADD", lambda c: c.sadd(a, "1", "2", "3", "4")),
        ("SADD b", lambda c: c.sadd(b, "3", "4", "5")),
        ("SMEMBERS", lambda c: c.smembers(a)),
        ("SISMEMBER", lambda c: c.sismember(a, "2")),
        ("SMISMEMBER", lambda c: c.smismember(a, ["1", "9"])),
        ("SCARD", lambda c: c.scard(a)),
        ("SINTER", lambda c: c.sinter(a, b)),
        ("SUNION", lambda c: c.sunion(a, b)),
        ("SDIFF", lambda c: c.sdiff(a, b)),
        ("SINTERSTORE", lambda c: c.sinterstore(t + "dst", [a, b])),
        ("SINTERCARD", lambda c: c.sintercard(2, [a, b])),
        ("SMOVE", lambda c: c.smove(a, b, "1")),
        ("SREM", lambda c: c.srem(a, "2", "nope")),
        ("SMEMBERS after", lambda c: (c.smembers(a), c.smembers(b))),
        ("SPOP count", lambda c: len(c.spop(t + "dst", 5))),
        ("SINTERCARD numkeys 0 (error)", lambda c: c.execute_command("SINTERCARD", "0", a)),
    ]
    compare(g, env, t, steps)


@group("sorted sets")
def zsets(g, env):
    t = "{zset}"
    z, y = t + "z", t + "y"
    steps = [
        ("ZADD", lambda c: c.zadd(z, {"a": 1, "b": 2, "c": 3.5})),
        ("ZADD y", lambda c: c.zadd(y, {"b": 10, "d": 4})),
        ("ZRANGE WITHSCORES", lambda c: c.zrange(z, 0, -1, withscores=True)),
        ("ZREVRANGE", lambda c: c.zrevrange(z, 0, 1)),
        ("ZRANGEBYSCORE", lambda c: c.zrangebyscore(z, 1.5, "+inf")),
        ("ZINCRBY", lambda c: c.zincrby(z, 2, "a")),
        ("ZSCORE", lambda c: c.zscore(z, "a")),
        ("ZMSCORE", lambda c: c.zmscore(z, ["a", "nope"])),
        ("ZRANK", lambda c: c.zrank(z, "c")),
        ("ZCOUNT", lambda c: c.zcount(z, 2, 4)),
        ("ZCARD", lambda c: c.zcard(z)),
        ("ZUNIONSTORE same slot", lambda c: c.zunionstore(t + "u", [z, y])),
        ("ZINTER same slot", lambda c: c.zinter([z, y], withscores=True)),
        ("ZRANGESTORE", lambda c: c.zrangestore(t + "r", z, 0, 1)),
        ("ZPOPMIN", lambda c: c.zpopmin(z)),
        ("ZREM", lambda c: c.zrem(z, "c", "nope")),
        ("ZADD bad score (error)", lambda c: c.execute_command("ZADD", z, "notanumber", "m")),
        ("ZRANGE u", lambda c: c.zrange(t + "u", 0, -1, withscores=True)),
    ]
    compare(g, env, t, steps)


@group("streams")
def streams(g, env):
    t = "{strm}"
    s, s2 = t + "s", t + "s2"
    steps = [
        ("XADD", lambda c: c.xadd(s, {"f": "1"}, id="1-1")),
        ("XADD 2", lambda c: c.xadd(s, {"f": "2", "g": "x"}, id="2-1")),
        ("XADD older id (error)", lambda c: c.xadd(s, {"f": "0"}, id="1-0")),
        ("XADD s2", lambda c: c.xadd(s2, {"h": "3"}, id="5-0")),
        ("XLEN", lambda c: c.xlen(s)),
        ("XRANGE", lambda c: c.xrange(s, "-", "+")),
        ("XREVRANGE", lambda c: c.xrevrange(s, "+", "-", count=1)),
        ("XREAD no BLOCK", lambda c: c.xread({s: "0"}, count=10)),
        ("XREAD two streams same slot", lambda c: c.xread({s: "1-1", s2: "0"})),
        ("XREAD nothing new", lambda c: c.xread({s: "9-0"})),
        ("XGROUP CREATE", lambda c: c.xgroup_create(s, "grp", id="0")),
        ("XGROUP CREATE again (error)", lambda c: c.xgroup_create(s, "grp", id="0")),
        ("XREADGROUP", lambda c: c.xreadgroup("grp", "consumer", {s: ">"}, count=10)),
        ("XPENDING", lambda c: c.xpending(s, "grp")),
        ("XACK", lambda c: c.xack(s, "grp", "1-1")),
        ("XDEL", lambda c: c.xdel(s, "2-1")),
        ("XTRIM", lambda c: c.xtrim(s, maxlen=0)),
        ("XLEN after", lambda c: c.xlen(s)),
    ]
    compare(g, env, t, steps)
    p = env.proxy_client()
    g.eq("XREAD across slots", errtext(lambda: p.xread({"strmA": "0", "strmB": "0"})),
         CROSSSLOT)


@group("geo")
def geo(g, env):
    t = "{geo}"
    k = t + "places"
    steps = [
        ("GEOADD", lambda c: c.geoadd(k, [13.361389, 38.115556, "Palermo",
                                          15.087269, 37.502669, "Catania"])),
        ("GEOPOS", lambda c: c.geopos(k, "Palermo", "nowhere")),
        ("GEODIST", lambda c: c.geodist(k, "Palermo", "Catania", unit="km")),
        ("GEOHASH", lambda c: c.geohash(k, "Palermo", "Catania")),
        ("GEOSEARCH", lambda c: c.geosearch(k, longitude=15, latitude=37, radius=200,
                                            unit="km", sort="ASC", withdist=True)),
        ("GEORADIUS", lambda c: c.georadius(k, 15, 37, 100, unit="km")),
        ("GEOSEARCHSTORE same slot", lambda c: c.geosearchstore(
            t + "dst", k, longitude=15, latitude=37, radius=200, unit="km")),
        ("GEOADD bad coords (error)", lambda c: c.execute_command("GEOADD", k, "500", "500", "x")),
    ]
    compare(g, env, t, steps)


@group("hyperloglog")
def hll(g, env):
    t = "{hll}"
    a, b = t + "a", t + "b"
    steps = [
        ("PFADD", lambda c: c.pfadd(a, *[f"e{i}" for i in range(100)])),
        ("PFADD b", lambda c: c.pfadd(b, *[f"e{i}" for i in range(50, 150)])),
        ("PFCOUNT", lambda c: c.pfcount(a)),
        ("PFCOUNT two keys same slot", lambda c: c.pfcount(a, b)),
        ("PFMERGE", lambda c: c.pfmerge(t + "m", a, b)),
        ("PFCOUNT merged", lambda c: c.pfcount(t + "m")),
    ]
    compare(g, env, t, steps)
    p = env.proxy_client()
    g.eq("PFCOUNT across slots", errtext(lambda: p.pfcount("hllA", "hllB")),
         CROSSSLOT)


@group("bitmaps")
def bitmaps(g, env):
    t = "{bit}"
    a, b = t + "a", t + "b"
    steps = [
        ("SETBIT", lambda c: c.setbit(a, 7, 1)),
        ("SETBIT 2", lambda c: (c.setbit(a, 9, 1), c.setbit(b, 9, 1), c.setbit(b, 20, 1))),
        ("GETBIT", lambda c: (c.getbit(a, 7), c.getbit(a, 8))),
        ("BITCOUNT", lambda c: c.bitcount(a)),
        ("BITCOUNT range", lambda c: c.bitcount(b, 1, 2)),
        ("BITPOS", lambda c: c.bitpos(a, 1)),
        ("BITOP AND same slot", lambda c: c.bitop("AND", t + "and", a, b)),
        ("BITOP OR same slot", lambda c: c.bitop("OR", t + "or", a, b)),
        ("BITCOUNT results", lambda c: (c.bitcount(t + "and"), c.bitcount(t + "or"))),
        ("BITFIELD", lambda c: c.bitfield(t + "bf").incrby("u8", 0, 200).get("u8", 0).execute()),
        ("SETBIT bad offset (error)", lambda c: c.execute_command("SETBIT", a, "-1", "1")),
    ]
    compare(g, env, t, steps)
    p = env.proxy_client()
    g.eq("BITOP across slots", errtext(lambda: p.bitop("AND", "bitX", "bitY", "bitZ")),
         CROSSSLOT)


@group("expiry")
def expiry(g, env):
    t = "{ttl}"
    k = t + "k"
    future = int(time.time()) + 1000
    steps = [
        ("SET", lambda c: c.set(k, "v")),
        ("TTL no expiry", lambda c: c.ttl(k)),
        ("TTL missing", lambda c: c.ttl(t + "none")),
        ("EXPIRE", lambda c: c.expire(k, 100)),
        ("TTL", lambda c: 95 <= c.ttl(k) <= 100),
        ("PTTL", lambda c: 95000 <= c.pttl(k) <= 100000),
        ("EXPIRE NX", lambda c: c.expire(k, 50, nx=True)),
        ("EXPIRE GT", lambda c: c.expire(k, 200, gt=True)),
        ("PERSIST", lambda c: c.persist(k)),
        ("TTL after PERSIST", lambda c: c.ttl(k)),
        ("EXPIREAT", lambda c: c.expireat(k, future)),
        ("EXPIRETIME", lambda c: c.expiretime(k) == future),
        ("SET PX expires", lambda c: (c.set(t + "px", "v", px=100), time.sleep(0.3),
                                      c.get(t + "px"))),
        ("EXPIRE bad value (error)", lambda c: c.execute_command("EXPIRE", k, "soon")),
        ("TYPE", lambda c: c.type(k)),
    ]
    compare(g, env, t, steps)


@group("generic keys")
def generic(g, env):
    t = "{gen}"
    a = t + "a"
    steps = [
        ("SET", lambda c: c.set(a, "1")),
        ("RENAME same slot", lambda c: c.rename(a, t + "b")),
        ("RENAMENX same slot", lambda c: c.renamenx(t + "b", t + "c")),
        ("RENAME missing (error)", lambda c: c.rename(t + "none", t + "x")),
        ("COPY same slot", lambda c: c.copy(t + "c", t + "d")),
        ("EXISTS same slot", lambda c: c.exists(t + "c", t + "d", t + "none", t + "c")),
        ("OBJECT ENCODING", lambda c: c.object("encoding", t + "c")),
        ("SORT", lambda c: (c.rpush(t + "l", "3", "1", "2"), c.sort(t + "l"))),
        ("DEL same slot", lambda c: c.delete(t + "c", t + "d", t + "none")),
    ]
    compare(g, env, t, steps)


@group("multi-key fan-out")
def fanout(g, env):
    p = env.proxy_client()
    keys = [f"fan:{i}" for i in range(30)]
    owners = {env.owner_addr(k) for k in keys}
    g.check(len(owners) >= 2, f"precondition: test keys span only {len(owners)} master(s)")
    g.eq("MSET across slots", p.mset({k: f"v{i}" for i, k in enumerate(keys)}), True)
    for i, k in enumerate(keys):
        if env.owner(k).get(k) != f"v{i}":
            g.check(False, f"MSET: {k} not stored on its owner")
            break
    order = keys[::-1] + ["fan:missing"] + keys[:3]
    want = [env.owner(k).get(k) for k in order]
    g.eq("MGET across slots, key order", p.mget(order), want)
    g.eq("MGET all missing", p.mget(["fan:x1", "fan:x2", "fan:x3"]), [None, None, None])
    g.eq("EXISTS summed (duplicates counted)", p.exists(*keys[:10], "fan:missing", keys[0]), 11)
    g.eq("TOUCH summed", p.touch(*keys[:10], "fan:missing"), 10)
    g.eq("DEL summed", p.delete(*keys[:10], "fan:missing"), 10)
    g.eq("UNLINK summed", p.unlink(*keys[10:], "fan:missing"), 20)
    g.eq("keys gone on owners", sum(env.owner(k).exists(k) for k in keys), 0)
    g.eq("DEL none", p.delete("fan:x1", "fan:x2"), 0)


@group("crossslot")
def crossslot(g, env):
    p = env.proxy_client()
    a, b = "cs:a", "cs:b"
    g.check(env.slot(a) != env.slot(b), "precondition: cs:a and cs:b share a slot")
    m = next(iter(env.masters.values()))
    cases = [
        ("MSETNX", lambda c: c.msetnx({a: "1", b: "2"})),
        ("RENAME", lambda c: c.rename(a, b)),
        ("SMOVE", lambda c: c.smove(a, b, "x")),
        ("LMOVE", lambda c: c.lmove(a, b)),
        ("SUNIONSTORE", lambda c: c.sunionstore("cs:c", [a, b])),
    ]
    for label, fn in cases:
        want = errtext(lambda fn=fn: fn(m))  # Redis Cluster's own answer, from any master
        g.eq(f"{label} across slots", errtext(lambda fn=fn: fn(p)), want)
        g.check(is_crossslot(want), f"{label}: reference said {want}")
    g.eq("MSETNX wrote nothing", p.exists(a, b), 0)
    ta, tb = "{cs}a", "{cs}b"
    g.eq("MSETNX same slot", p.msetnx({ta: "1", tb: "2"}), True)
    g.eq("RENAME same slot", p.rename(ta, "{cs}c"), True)
    p.delete(tb, "{cs}c")


@group("pipeline")
def pipeline(g, env):
    p = env.proxy_client()
    pipe = p.pipeline(transaction=False)
    want = []
    for i in range(250):
        k = f"pl:{i}"
        pipe.set(k, i)
        want.append(True)
        pipe.get(k)
        want.append(str(i))
        pipe.incr(k)
        want.append(i + 1)
        if i % 50 == 0:
            pipe.mget([k, f"pl:{i + 1000}", k])
            want.append([str(i + 1), None, str(i + 1)])
        elif i % 50 == 1:
            pipe.ping()
            want.append(True)
        elif i % 50 == 2:
            pipe.hget(k, "f")  # WRONGTYPE error in place
            want.append("WRONGTYPE")
        else:
            pipe.delete(k)
            want.append(1)
    got = pipe.execute(raise_on_error=False)
    got = ["WRONGTYPE" if isinstance(x, redis.ResponseError) and "WRONGTYPE" in str(x)
           else x for x in got]
    g.eq("reply count", len(got), len(want))
    bad = [(i, x, y) for i, (x, y) in enumerate(zip(got, want, strict=False)) if x != y]
    g.check(not bad, f"{len(bad)} replies out of place, first: {short(bad[:3])}")
    g.eq("1000 commands", len(want), 1000)
    p.delete(*[f"pl:{i}" for i in range(250)])


@group("transactions")
def transactions(g, env):
    t = "{tx}"
    a, lk = t + "a", t + "l"

    def tx_ok(c):
        pipe = c.pipeline(transaction=True)
        pipe.set(a, 1).incr(a).get(a).lpush(lk, "x", "y").lrange(lk, 0, -1)
        return pipe.execute()

    def tx_runtime_error(c):
        pipe = c.pipeline(transaction=True)
        pipe.set(a, "text").incr(a).set(t + "b", "after")
        res = pipe.execute(raise_on_error=False)
        return [err(x) if isinstance(x, Exception) else x for x in res] + [c.get(t + "b")]

    def watch_no_conflict(c):
        with c.pipeline() as pipe:
            pipe.watch(a)
            v = pipe.get(a)
            pipe.multi()
            pipe.set(a, f"{v}!")
            return pipe.execute(), c.get(a)

    def tx_queue_error(c):
        pipe = c.pipeline(transaction=True)
        pipe.set(t + "qa", "1").execute_command("GET").set(t + "qb", "2")
        try:
            pipe.execute()
            outcome = "executed"
        except redis.RedisError as e:
            outcome = err(e)
        return outcome, c.exists(t + "qa", t + "qb")

    def transaction_helper(c):
        c.set(a, "10")

        def body(pipe):
            v = int(pipe.get(a))
            pipe.multi()
            pipe.set(a, v + 1)
            pipe.get(a)

        return c.transaction(body, a), c.get(a)

    steps = [
        ("MULTI/EXEC pipeline", tx_ok),
        ("queue-time error: EXECABORT, nothing applied", tx_queue_error),
        ("Redis.transaction() helper with WATCH", transaction_helper),
        ("runtime error inside EXEC", tx_runtime_error),
        ("WATCH without conflict", watch_no_conflict),
        ("empty MULTI/EXEC", lambda c: c.pipeline(transaction=True).execute()),
        ("EXEC without MULTI", lambda c: c.execute_command("EXEC")),
        ("DISCARD without MULTI", lambda c: c.execute_command("DISCARD")),
    ]
    compare(g, env, t, steps)

    # WATCH with a conflicting write from another client: WatchError, nothing applied.
    def watch_conflict(c, other):
        c.set(a, "start")
        with c.pipeline() as pipe:
            pipe.watch(a)
            pipe.get(a)
            other.set(a, "changed")
            pipe.multi()
            pipe.set(a, "mine")
            try:
                pipe.execute()
                outcome = "executed"
            except redis.WatchError:
                outcome = "WatchError"
        return outcome, c.get(a)

    ref = env.owner(a)
    env.clean(t)
    want = watch_conflict(ref, client_at(env.owner_addr(a)))
    env.clean(t)
    p = env.proxy_client()
    got = watch_conflict(p, env.proxy_client())
    g.eq("WATCH + conflicting write", got, want)
    g.eq("WATCH + conflicting write (documented)", got, ("WatchError", "changed"))

    m = next(iter(env.masters.values()))
    g.eq("WATCH keys in two slots", errtext(lambda: p.watch("txA", "txB")),
         errtext(lambda: m.watch("txA", "txB")))

    # A key of another slot inside MULTI: the transaction is aborted, nothing applied.
    env.clean(t)
    pipe = p.pipeline(transaction=True)
    pipe.set(a, "1").set("other-slot-key", "2").set(t + "z", "3")
    try:
        pipe.execute()
        outcome = "executed"
    except (redis.exceptions.ExecAbortError, redis.ResponseError) as e:
        outcome = f"{type(e).__name__}: {e}"
    g.check("CrossSlot" in outcome or "EXECABORT" in outcome.upper() or "CROSSSLOT" in outcome,
            f"cross-slot key in MULTI: {outcome}")
    g.eq("cross-slot MULTI applied nothing", p.exists(a, t + "z") + p.exists("other-slot-key"), 0)
    g.eq("session usable after abort", p.set(a, "ok"), True)
    env.clean(t)


@group("blocking")
def blocking(g, env):
    t = "{blk}"
    q = t + "q"
    p, other = env.proxy_client(), env.proxy_client()
    env.clean(t)

    def push_later():
        time.sleep(0.3)
        other.rpush(q, "hello")

    th = threading.Thread(target=push_later)
    start = time.monotonic()
    th.start()
    got = p.blpop([q], timeout=5)
    th.join()
    took = time.monotonic() - start
    g.eq("BLPOP served by a push", got and tuple(got), (q, "hello"))
    g.check(took < 3, f"BLPOP served after {took:.2f}s")

    # While one client blocks, another client's requests are not stalled.
    def blocked():
        p.blpop([t + "never"], timeout=2)

    th = threading.Thread(target=blocked)
    th.start()
    time.sleep(0.2)
    s = time.monotonic()
    other.set(t + "x", "1")
    quick = time.monotonic() - s
    th.join()
    g.check(quick < 0.5, f"other client stalled {quick:.2f}s during a BLPOP")

    start = time.monotonic()
    got = p.blpop([t + "empty"], timeout=1)
    took = time.monotonic() - start
    g.eq("BLPOP timeout returns None", got, None)
    g.check(0.8 <= took < 3, f"BLPOP timeout took {took:.2f}s")
    g.eq("session usable after BLPOP", p.ping(), True)

    # A client that leaves while blocked must not consume a later push.
    c = raw_conn("127.0.0.1", env.port)
    c.send_command("BLPOP", t + "left", "0")
    time.sleep(0.2)
    c.disconnect()
    time.sleep(0.2)
    other.rpush(t + "left", "keep")
    time.sleep(0.2)
    g.eq("BLPOP of a departed client pops nothing", other.lrange(t + "left", 0, -1), ["keep"])

    steps = [
        ("BLPOP with data", lambda c: (c.rpush(q, "a", "b"), c.blpop([q], timeout=1))),
        ("BRPOP", lambda c: c.brpop([q], timeout=1)),
        ("BLMOVE same slot", lambda c: (c.rpush(q, "m"), c.blmove(q, t + "d", 1))),
        ("BZPOPMIN", lambda c: (c.zadd(t + "z", {"a": 1}), c.bzpopmin([t + "z"], timeout=1))),
        ("XREAD BLOCK timeout", lambda c: (c.xadd(t + "s", {"f": "v"}, id="1-0"),
                                           c.xread({t + "s": "$"}, block=200))),
        ("BLPOP negative timeout (error)", lambda c: c.execute_command("BLPOP", q, "-1")),
        ("BLPOP inside a pipeline, order kept",
         lambda c: c.pipeline(transaction=False).rpush(q, "p").set(t + "y", "1")
         .blpop([q], timeout=1).blpop([t + "empty"], timeout=0.2).get(t + "y")
         .lrange(q, 0, -1).execute()),
    ]
    compare(g, env, t, steps)
    g.eq("BLPOP across slots", errtext(lambda: p.blpop(["blkA", "blkB"], timeout=1)),
         CROSSSLOT)


def wait_message(ps, want_type, timeout=3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(timeout=0.2)
        if m and m["type"] == want_type:
            return m
    return None


@group("pub/sub")
def pubsub(g, env):
    p = env.proxy_client()
    ps = p.pubsub()
    ps.subscribe("compat-chan")
    ps.psubscribe("compat-pat.*")
    g.check(wait_message(ps, "subscribe") is not None, "no subscribe confirmation")
    g.check(wait_message(ps, "psubscribe") is not None, "no psubscribe confirmation")
    publisher = env.proxy_client()
    publisher.publish("compat-chan", "m1")
    m = wait_message(ps, "message")
    g.eq("message", m and (m["channel"], m["data"]), ("compat-chan", "m1"))
    publisher.publish("compat-pat.x", "m2")
    m = wait_message(ps, "pmessage")
    g.eq("pmessage", m and (m["pattern"], m["channel"], m["data"]),
         ("compat-pat.*", "compat-pat.x", "m2"))
    ps.unsubscribe("compat-chan")
    m = wait_message(ps, "unsubscribe")
    g.eq("unsubscribe count", m and m["data"], 1)
    ps.close()

    # RESP2 subscribed mode: Redis's own replies (compare with a master; the GET's key is
    # one that master owns, or it would answer MOVED before the subscribed-mode error).
    host, port = split_addr(env.master_addrs[0])
    key = next(f"k{i}" for i in range(1000) if env.owner_addr(f"k{i}") == env.master_addrs[0])
    results = []
    for h, pt in ((host, port), ("127.0.0.1", env.port)):
        c = raw_conn(h, pt)
        seq = [raw_cmd(c, "SUBSCRIBE", "compat-x"), raw_cmd(c, "PING"),
               raw_cmd(c, "GET", key), raw_cmd(c, "PSUBSCRIBE", "compat-p*"),
               raw_cmd(c, "PUNSUBSCRIBE"), raw_cmd(c, "UNSUBSCRIBE", "compat-x"),
               raw_cmd(c, "PING"), raw_cmd(c, "SET", key, "after")]
        results.append(seq)
        c.disconnect()
    g.eq("subscribed-mode replies", results[1], results[0])

    # Shard channels: SSUBSCRIBE on a raw connection, SPUBLISH via execute_command.
    ch = "{shard}compat"
    c = raw_conn("127.0.0.1", env.port)
    g.eq("SSUBSCRIBE", raw_cmd(c, "SSUBSCRIBE", ch), ["ssubscribe", ch, 1])
    g.eq("SPUBLISH receivers", publisher.execute_command("SPUBLISH", ch, "hi"), 1)
    msg = c.read_response() if c.can_read(timeout=3) else "nothing within 3 s"
    g.eq("smessage", msg, ["smessage", ch, "hi"])
    c.disconnect()
    g.eq("SSUBSCRIBE across slots", raw_cmd(raw_conn("127.0.0.1", env.port),
                                             "SSUBSCRIBE", "shA", "shB"),
         CROSSSLOT)


@group("scripts")
def scripts(g, env):
    t = "{lua}"
    k = t + "k"
    set_script = "return redis.call('SET', KEYS[1], ARGV[1])"
    steps = [
        ("EVAL with key", lambda c: c.eval(set_script, 1, k, "v")),
        ("EVAL two keys same slot",
         lambda c: c.eval("return {KEYS[1], KEYS[2], redis.call('GET', KEYS[1])}",
                          2, k, t + "j")),
        ("EVAL no keys", lambda c: c.eval("return 1 + 1", 0)),
        ("EVAL runtime error", lambda c: c.eval("return redis.call('INCR', KEYS[1])", 1, k)),
        ("EVAL syntax error", lambda c: c.eval("return +", 0)),
        ("EVALSHA unknown", lambda c: c.evalsha("0" * 40, 0)),
        ("EVAL bad numkeys (error)", lambda c: c.execute_command("EVAL", "return 1", "5", "a")),
    ]
    compare(g, env, t, steps)

    p = env.proxy_client()
    get_script = "return redis.call('GET', KEYS[1])"
    sha = p.script_load(get_script)
    g.eq("SCRIPT LOAD sha", sha, env.owner("x").script_load(get_script))
    keys = [f"lua:{i}" for i in range(12)]
    g.check(len({env.owner_addr(x) for x in keys}) >= 2, "precondition: keys on one master")
    for x in keys:
        p.set(x, x + "!")
    got = [p.evalsha(sha, 1, x) for x in keys]
    g.eq("EVALSHA on keys in many slots", got, [x + "!" for x in keys])
    g.eq("SCRIPT EXISTS (every master)", p.script_exists(sha, "0" * 40), [True, False])
    g.eq("SCRIPT loaded on every master",
         [m.script_exists(sha)[0] for m in env.masters.values()], [True] * len(env.masters))
    a, b = "lua:a", "lua:b"
    g.check(env.slot(a) != env.slot(b), "precondition: lua:a and lua:b share a slot")
    want = errtext(lambda: env.owner(a).eval(set_script, 2, a, b, "v"))
    g.eq("EVAL keys in two slots", errtext(lambda: p.eval(set_script, 2, a, b, "v")), want)
    g.check(is_crossslot(want), f"EVAL two slots: reference said {want}")

    lib = ("#!lua name=compatlib\n"
           "redis.register_function('cget', function(keys, args) "
           "return redis.call('GET', keys[1]) end)")
    g.eq("FUNCTION LOAD (every master)", p.function_load(lib, replace=True), "compatlib")
    g.eq("FCALL on keys in many slots", [p.fcall("cget", 1, x) for x in keys],
         [x + "!" for x in keys])
    g.eq("FUNCTION DELETE", p.function_delete("compatlib"), True)
    g.eq("SCRIPT FLUSH", p.script_flush(), True)
    g.eq("SCRIPT EXISTS after flush", p.script_exists(sha), [False])
    p.delete(*keys)


@group("scan")
def scan(g, env):
    p = env.proxy_client()
    n = 5000
    pipe = p.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"scan:{i}", i)
    pipe.execute()
    time.sleep(0.3)  # let the masters finish incremental rehashing
    start = time.monotonic()
    seen = collections.Counter(p.scan_iter(match="scan:*", count=200))
    took = time.monotonic() - start
    g.eq("keys returned", len(seen), n)
    dups = [k for k, c in seen.items() if c > 1]
    g.check(not dups, f"{len(dups)} keys returned more than once, e.g. {dups[:3]}")
    g.eq("the right keys", set(seen) == {f"scan:{i}" for i in range(n)}, True)
    g.check(took < 20, f"scan_iter took {took:.1f}s")
    # Cursor format: the low 10 bits name the master.
    cursor, _ = p.scan(0, match="scan:*", count=10)
    g.check(int(cursor) & 1023 < len(env.masters), f"cursor {cursor} names no master")
    g.eq("invalid cursor", errtext(lambda: p.scan("abc")),
         errtext(lambda: env.owner("x").scan("abc")))
    g.eq("SCAN TYPE", sorted(p.scan_iter(match="scan:1?", _type="string")),
         sorted(f"scan:{i}" for i in range(10, 20)))
    for i in range(0, n, 1000):
        p.delete(*[f"scan:{j}" for j in range(i, i + 1000)])


@group("cluster-wide")
def cluster_wide(g, env):
    p = env.proxy_client()
    g.eq("FLUSHALL", p.flushall(), True)
    g.eq("masters empty", [m.dbsize() for m in env.masters.values()], [0] * len(env.masters))
    keys = [f"cw:{i}" for i in range(30)]
    p.mset({k: "1" for k in keys})
    g.eq("DBSIZE summed", p.dbsize(), sum(m.dbsize() for m in env.masters.values()))
    g.eq("DBSIZE", p.dbsize(), 30)
    want = sorted(k for m in env.masters.values() for k in m.keys("cw:*"))
    g.eq("KEYS concatenated", sorted(p.keys("cw:*")), want)
    g.eq("KEYS all", len(p.keys("cw:*")), 30)
    g.check(p.randomkey() in keys, "RANDOMKEY returned a key that does not exist")
    g.eq("FLUSHDB", p.flushdb(), True)
    g.eq("DBSIZE after FLUSHDB", p.dbsize(), 0)
    g.eq("RANDOMKEY empty", p.randomkey(), None)


@group("info")
def info(g, env):
    p = env.proxy_client()
    p.mset({f"info:{i}": "1" for i in range(20)})
    c = raw_conn("127.0.0.1", env.port)
    text = raw_cmd(c, "INFO")
    g.check(isinstance(text, str) and "# Server" in text, "INFO has no # Server")
    g.check(isinstance(text, str) and "# Keyspace" in text, "INFO has no # Keyspace")
    total = sum(m.dbsize() for m in env.masters.values())
    got = re.search(r"^db0:keys=(\d+)", text or "", re.M)
    g.eq("INFO keyspace keys summed", got and int(got.group(1)), total)
    server_only = raw_cmd(c, "INFO", "server")
    g.check("# Server" in server_only and "# Keyspace" not in server_only,
            "INFO server has other sections")
    g.check("# Keyspace" in raw_cmd(c, "INFO", "keyspace"), "INFO keyspace lacks # Keyspace")
    c.disconnect()
    g.check("redis_version" in p.info(), "redis-py cannot parse INFO")
    p.delete(*[f"info:{i}" for i in range(20)])


@group("resp3")
def resp3(g, env):
    if int(redis.__version__.split(".")[0]) < 5:
        g.check(True, "")
        return
    t = "{r3}"
    h = t + "h"
    host, port = split_addr(env.owner_addr(t))
    results = []
    for hh, pp in ((host, port), ("127.0.0.1", env.port)):
        c = raw_conn(hh, pp, protocol=3)
        results.append([
            raw_cmd(c, "HSET", h, "a", "1", "b", "2"),
            raw_cmd(c, "HGETALL", h),
            raw_cmd(c, "ZADD", t + "z", "1.5", "m"),
            raw_cmd(c, "ZRANGE", t + "z", "0", "-1", "WITHSCORES"),
            raw_cmd(c, "SMEMBERS", t + "none"),
            raw_cmd(c, "GET", t + "none"),
            raw_cmd(c, "INCRBYFLOAT", t + "f", "1.5"),
            raw_cmd(c, "GET", h),
            raw_cmd(c, "DEL", h, t + "z", t + "f"),
        ])
        hello = raw_cmd(c, "HELLO", "3")
        c.disconnect()
    g.eq("RESP3 replies", results[1], results[0])
    g.check(isinstance(results[1][1], dict), f"HGETALL over RESP3 is {type(results[1][1])}")
    g.check(isinstance(hello, dict) and hello.get("proto") == 3, f"HELLO 3 -> {short(hello)}")
    r3 = env.proxy_client(protocol=3)
    r3.hset(h, mapping={"x": "1"})
    g.eq("redis-py protocol=3 HGETALL", r3.hgetall(h), {"x": "1"})
    g.eq("redis-py protocol=3 pipeline", r3.pipeline().set(t + "a", 1).get(t + "a").execute(),
         [True, "1"])
    ps = r3.pubsub()
    ps.subscribe("compat-r3")
    g.check(wait_message(ps, "subscribe") is not None, "RESP3: no subscribe confirmation")
    r3.publish("compat-r3", "push")
    m = wait_message(ps, "message")
    g.eq("RESP3 pub/sub message", m and m["data"], "push")
    ps.close()
    r3.delete(h, t + "a")


@group("redis-py defaults")
def defaults(g, env):
    # redis.Redis() as an application would create it: redis-py 8 speaks RESP3 by default,
    # 5 to 7 RESP2. Every other group pins protocol=2 (or 3) to compare like with like.
    d = redis.Redis(host="127.0.0.1", port=env.port, decode_responses=True,
                    socket_timeout=SOCKET_TIMEOUT)
    t = "{dflt}"
    g.eq("SET/GET", (d.set(t + "k", "v"), d.get(t + "k")), (True, "v"))
    g.eq("HGETALL", (d.hset(t + "h", mapping={"a": "1"}), d.hgetall(t + "h")), (1, {"a": "1"}))
    keys = [f"dflt:{i}" for i in range(10)]
    d.mset({k: k for k in keys})
    g.eq("MGET across slots", d.mget(keys + ["dflt:none"]), keys + [None])
    g.eq("pipeline", d.pipeline(transaction=False).incr(t + "n").incr(t + "n").execute(), [1, 2])
    g.eq("transaction", d.pipeline().set(t + "x", "1").get(t + "x").execute(), [True, "1"])
    g.eq("DEL across slots", d.delete(*keys, t + "k", t + "h", t + "n", t + "x"), 14)


@group("cluster")
def cluster(g, env):
    c = raw_conn("127.0.0.1", env.port)
    slots = raw_cmd(c, "CLUSTER", "SLOTS")
    ok = (isinstance(slots, list) and len(slots) == 1 and slots[0][:2] == [0, 16383]
          and slots[0][2][:2] == ["127.0.0.1", env.port])
    g.check(ok, f"CLUSTER SLOTS: {short(slots)}")
    info_text = raw_cmd(c, "CLUSTER", "INFO")
    for line in ("cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:1"):
        g.check(line in str(info_text), f"CLUSTER INFO lacks {line}")
    m = next(iter(env.masters.values()))
    for key in ("foo", "{user1000}.following", "{}x", "a{b}c", ""):
        g.eq(f"CLUSTER KEYSLOT {key!r}", raw_cmd(c, "CLUSTER", "KEYSLOT", key),
             m.execute_command("CLUSTER", "KEYSLOT", key))
    nodes = raw_cmd(c, "CLUSTER", "NODES")
    g.check(f"127.0.0.1:{env.port}@" in str(nodes) and "myself,master" in str(nodes)
            and "0-16383" in str(nodes), f"CLUSTER NODES: {short(nodes)}")
    myid = raw_cmd(c, "CLUSTER", "MYID")
    g.check(isinstance(myid, str) and re.fullmatch(r"[0-9a-f]{40}", myid), f"MYID {myid}")
    shards = raw_cmd(c, "CLUSTER", "SHARDS")
    g.check(isinstance(shards, list) and len(shards) == 1, f"CLUSTER SHARDS: {short(shards)}")
    refused = raw_cmd(c, "CLUSTER", "COUNTKEYSINSLOT", "1")
    g.check(isinstance(refused, tuple) and refused[2].startswith("slotgate:"),
            f"CLUSTER COUNTKEYSINSLOT: {short(refused)}")
    c.disconnect()


@group("connection")
def connection(g, env):
    p = env.proxy_client()
    c = raw_conn("127.0.0.1", env.port)
    mc = raw_conn(*split_addr(env.master_addrs[0]))
    for args in (("SELECT", "0"), ("SELECT", "1"), ("SELECT", "x"), ("PING",), ("PING", "hi"),
                 ("ECHO", "x y"), ("QUIT",)):
        g.eq(" ".join(args), raw_cmd(c, *args), raw_cmd(mc, *args))
    mc.disconnect()
    c.disconnect()
    g.eq("redis-py select-less ping", p.ping(), True)
    c = raw_conn("127.0.0.1", env.port)
    g.eq("CLIENT SETNAME", raw_cmd(c, "CLIENT", "SETNAME", "compat"), "OK")
    g.eq("CLIENT GETNAME", raw_cmd(c, "CLIENT", "GETNAME"), "compat")
    g.check(isinstance(raw_cmd(c, "CLIENT", "ID"), int), "CLIENT ID is not an integer")
    c.disconnect()
    # The proxy's own clients, in Redis's format, parsed by redis-py's own parser.
    listed = p.client_list()
    g.check(len(listed) > 0 and all("id" in cl and "addr" in cl and "cmd" in cl for cl in listed),
            f"CLIENT LIST unparsable by redis-py: {listed[:2]}")
    me = p.client_info()
    # As a node shows the asking client: its command with the subcommand.
    node = next(iter(env.masters.values())).client_info()
    g.check(me.get("cmd") == node.get("cmd") == "client|info", f"CLIENT INFO: {me} / {node}")
    e = errtext(lambda: env.proxy_client(db=1).ping())
    g.check(e is not None, "redis.Redis(db=1) connected through the proxy")


@group("errors")
def errors(g, env):
    p = env.proxy_client()
    m = next(iter(env.masters.values()))
    for args in (("NOSUCHCMD", "a", "b"), ("nosuch",), ("GET",), ("SET", "k"),
                 ("HGET", "k", "f", "extra"), ("CLIENT", "SETNAME"), ("CONFIG", "NOSUCHSUB"),
                 ("OBJECT", "NOSUCHSUB"), ("SCRIPT", "NOSUCHSUB"), ("XINFO", "NOSUCHSUB"),
                 ("PING", "a", "b"), ("FCALL", "nosuchfn", "x"),
                 ("CLUSTER", "NOSUCHSUB"), ("CLIENT", "NOSUCHSUB"),
                 ("CLIENT", "UNBLOCK", "123456789"), ("CLIENT", "UNBLOCK", "x"),
                 ("CLIENT", "GETREDIR"), ("CLIENT", "TRACKINGINFO")):
        want = outcome(lambda args=args: m.execute_command(*args))
        g.eq(" ".join(args), outcome(lambda args=args: p.execute_command(*args)), want)
    for args in (("CONFIG", "SET", "maxmemory", "0"), ("CONFIG", "GET", "maxmemory"),
                 ("DEBUG", "SLEEP", "0")):
        e = errtext(lambda args=args: p.execute_command(*args))
        g.check(e is not None and e[2].startswith("slotgate:"),
                f"{' '.join(args)} not refused with 'slotgate:': {short(e)}")
    g.eq("proxy alive after refusals", p.ping(), True)
    # FUNCTION STATS asks every master on connections of its own (a running function shows).
    g.eq("FUNCTION STATS", outcome(lambda: p.execute_command("FUNCTION", "STATS")),
         outcome(lambda: m.execute_command("FUNCTION", "STATS")))
    # CLIENT PAUSE is the proxy's own (it pauses its dispatch), answered as a node answers.
    g.eq("CLIENT PAUSE 10 WRITE", outcome(lambda: p.execute_command("CLIENT", "PAUSE", "10", "WRITE")),
         outcome(lambda: m.execute_command("CLIENT", "PAUSE", "10", "WRITE")))


@group("malformed requests")
def malformed(g, env):
    # Last on purpose: a request that crashes a worker would break every later group.
    m = next(iter(env.masters.values()))
    cases = [("MSET", "{mf}a", "1", "{mf}b"), ("MSET", "mfa", "1", "mfb"),
             ("MSET", "mfa", "1", "mfb", "2", "mfc")]
    bad = {}
    for args in cases:
        p = env.proxy_client()  # a fresh connection each time: it may land on any worker
        e = errtext(lambda p=p, args=args: p.execute_command(*args))
        ok = e is not None and e[1] != "ConnectionError" and (
            "wrong number of arguments for 'mset'" in e[2] or is_crossslot(e))
        if not ok:
            bad[" ".join(args)] = e
    for args, e in bad.items():
        g.check(False, f"{args}: expected Redis's arity error (or CROSSSLOT), got {short(e)}"
                f" (Redis: {short(errtext(lambda args=args: m.execute_command(*args.split())))})")
    alive = 0
    for _ in range(8):
        try:
            alive += bool(env.proxy_client(socket_timeout=1).ping())
        except redis.RedisError:
            pass
    g.eq("new connections answered (PING) after malformed requests", alive, 8)


# --------------------------------------------------------------------------------------


def main():
    warnings.simplefilter("ignore", DeprecationWarning)  # redis-py's setex() is "deprecated"
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGTERM, _on_term)
    signal.alarm(WATCHDOG_S)
    started = time.monotonic()
    env = Env()
    passed = failed = 0
    try:
        env.start()
        for name, fn in GROUPS:
            g = Group(name)
            t0 = time.monotonic()
            try:
                fn(g, env)
            except Watchdog:
                raise
            except Exception as e:  # noqa: BLE001 - a crash is a failed group
                tb = traceback.extract_tb(e.__traceback__)
                where = next((f"line {f.lineno}" for f in reversed(tb)
                              if f.filename == __file__), "")
                g.failures.append(f"{type(e).__name__}: {e} ({where})")
            if env.proxy.poll() is not None:
                g.failures.append(f"proxy exited ({env.proxy.returncode}): {env.log_tail(500)}")
            if g.failures:
                failed += 1
                print(f"FAIL {name}: " + "; ".join(g.failures), flush=True)
            else:
                passed += 1
                print(f"ok {name}", flush=True)
            if os.environ.get("COMPAT_TIMING"):
                print(f"  ({time.monotonic() - t0:.2f}s)", flush=True)
            if env.proxy.poll() is not None:
                break
    except (Exception, Watchdog) as e:  # noqa: BLE001
        failed += 1
        print(f"FAIL setup: {type(e).__name__}: {e}", flush=True)
    finally:
        signal.alarm(0)
        env.stop()
    print(f"runtime: {time.monotonic() - started:.1f}s", flush=True)
    print(f"compat: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""redis-py against slotgate, as applications use it: sync, asyncio and RedisCluster clients,
each in RESP2 and RESP3. Run by compat/run.py (COMPAT_PROXY=host:port); prints one
`PASS|FAIL|SKIP redis-py/<mode>/<resp>/<case>` line per case (see compat/run.py).

The asyncio client runs the same cases through a small facade that awaits each call, plus
its own concurrent and blocking cases with real tasks.
"""

import asyncio
import base64
import os
import sys
import threading
import time
import traceback
import warnings

import redis
import redis.asyncio

HOST, PORT = os.environ.get("COMPAT_PROXY", "127.0.0.1:7000").rsplit(":", 1)
PORT = int(PORT)
PREFIX = os.environ.get("COMPAT_PREFIX", "cpython")
TIMEOUT = 10


class Skip(Exception):
    """The library cannot express the case in this mode."""


def eq(label, got, want):
    if got != want:
        raise AssertionError(f"{label}: got {str(got)[:200]!r}, want {str(want)[:200]!r}")


def until(label, cond, ceiling=10.0):
    deadline = time.monotonic() + ceiling
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{label}: not within {ceiling}s")
        time.sleep(0.02)


class Awaiting:
    """Makes an asyncio client look synchronous: every coroutine it returns is awaited."""

    def __init__(self, obj, loop):
        self._obj, self._loop = obj, loop

    def __getattr__(self, name):
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr

        return Awaiting(attr, self._loop)

    def __call__(self, *a, **kw):
        out = self._obj(*a, **kw)
        if asyncio.iscoroutine(out) or isinstance(out, asyncio.Future):
            out = self._loop.run_until_complete(out)
        if type(out).__module__.startswith("redis.") or callable(out):
            return Awaiting(out, self._loop)
        return out


# === the cases ===  Each takes (c, ctx) where ctx knows the mode and makes more clients.


def case_handshake(c, ctx):
    eq("PING", c.ping(), True)
    # RedisCluster routes keyless commands only when told which node: the default one.
    node = {"target_nodes": c.get_default_node()} if ctx.cluster else {}
    eq("ECHO", c.echo("hi", **node), "hi")
    if not ctx.cluster:
        eq("CLIENT SETNAME", c.client_setname("compat-py"), True)
        eq("CLIENT GETNAME", c.client_getname(), "compat-py")
    hello = c.execute_command("HELLO", ctx.proto, **node)
    hello = hello if isinstance(hello, dict) else dict(zip(hello[::2], hello[1::2]))
    eq("HELLO proto", hello.get("proto"), ctx.proto)


def case_string(c, ctx):
    k = ctx.key("str")
    eq("SET", c.set(k, "v1"), True)
    eq("GET", c.get(k), "v1")
    eq("APPEND", c.append(k, "23"), 4)
    eq("GETRANGE", c.getrange(k, 1, 2), "12")
    eq("INCRBY", c.incrby(ctx.key("ctr"), 5), 5)
    eq("INCRBYFLOAT", c.incrbyfloat(ctx.key("ctr"), 0.5), 5.5)
    c.set(k, "x", ex=100)
    ttl = c.ttl(k)
    if not 0 < ttl <= 100:
        raise AssertionError(f"TTL {ttl}")
    eq("SET NX on existing", c.set(k, "y", nx=True), None)


def case_hash(c, ctx):
    k = ctx.key("hash")
    eq("HSET", c.hset(k, mapping={"a": "1", "b": "2"}), 2)
    eq("HGETALL", c.hgetall(k), {"a": "1", "b": "2"})
    eq("HINCRBY", c.hincrby(k, "a", 10), 11)
    eq("HMGET", c.hmget(k, ["a", "b", "zz"]), ["11", "2", None])


def case_list(c, ctx):
    k = ctx.key("list")
    eq("RPUSH", c.rpush(k, "a", "b", "c"), 3)
    eq("LRANGE", c.lrange(k, 0, -1), ["a", "b", "c"])
    eq("LPOP", c.lpop(k), "a")
    eq("LPOS", c.lpos(k, "c"), 1)


def case_set(c, ctx):
    k = ctx.key("set")
    eq("SADD", c.sadd(k, "a", "b", "c"), 3)
    eq("SMEMBERS", c.smembers(k), {"a", "b", "c"})
    eq("SISMEMBER", c.sismember(k, "b"), True)


def case_zset(c, ctx):
    k = ctx.key("zset")
    eq("ZADD", c.zadd(k, {"a": 1, "b": 2.5}), 2)
    # redis-py gives pairs as tuples in RESP2 and as lists in RESP3 (its own parsing).
    got = [tuple(x) for x in c.zrange(k, 0, -1, withscores=True)]
    eq("ZRANGE", got, [("a", 1.0), ("b", 2.5)])
    eq("ZSCORE", c.zscore(k, "b"), 2.5)
    eq("ZINCRBY", c.zincrby(k, 1, "a"), 2.0)


def case_stream(c, ctx):
    k = ctx.key("stream")
    i1 = c.xadd(k, {"f": "1"})
    c.xadd(k, {"f": "2"})
    got = c.xrange(k)
    eq("XRANGE", [fields for _, fields in got], [{"f": "1"}, {"f": "2"}])
    eq("XLEN", c.xlen(k), 2)
    got = c.xread({k: i1}, count=10)
    entries = got[k][0] if isinstance(got, dict) else got[0][1]
    eq("XREAD", [f for _, f in entries], [{"f": "2"}])


def case_hyperloglog(c, ctx):
    k = ctx.key("hll")
    c.pfadd(k, "a", "b", "c", "a")
    eq("PFCOUNT", c.pfcount(k), 3)


def case_geo(c, ctx):
    k = ctx.key("geo")
    eq("GEOADD", c.geoadd(k, [13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania"]), 2)
    d = c.geodist(k, "Palermo", "Catania", unit="km")
    if abs(d - 166.2742) > 0.01:
        raise AssertionError(f"GEODIST {d}")


def case_bitmap(c, ctx):
    k = ctx.key("bits")
    c.setbit(k, 7, 1)
    c.setbit(k, 100, 1)
    eq("BITCOUNT", c.bitcount(k), 2)
    eq("GETBIT", c.getbit(k, 100), 1)


def case_crossslot_multikey(c, ctx):
    keys = [ctx.key(f"mk{i}") for i in range(12)]  # no hash tag: spread over the masters
    pairs = {k: f"v{i}" for i, k in enumerate(keys)}
    if ctx.cluster:
        c.mset_nonatomic(pairs)
        eq("MGET", c.mget_nonatomic(keys), list(pairs.values()))
    else:
        eq("MSET", c.mset(pairs), True)
        eq("MGET", c.mget(keys), list(pairs.values()))
    eq("EXISTS", c.exists(*keys), 12)
    eq("DEL", c.delete(*keys), 12)


def case_pipeline(c, ctx):
    p = c.pipeline(transaction=False)
    n = 160
    for i in range(n):
        p.set(ctx.key(f"p{i}"), i)
    for i in range(n):
        p.incr(ctx.key(f"p{i}"))
    out = p.execute()
    eq("pipeline SETs", out[:n], [True] * n)
    eq("pipeline INCRs", out[n:], [i + 1 for i in range(n)])


def case_multi_exec(c, ctx):
    k = ctx.tagged("tx")
    try:
        p = c.pipeline(transaction=True)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"no transactions in this client: {e}")
    p.set(k + "a", 1)
    p.incr(k + "a")
    p.get(k + "a")
    # The cluster pipeline leaves SET's reply as "OK" where the plain client says True.
    got = [True if x == "OK" else x for x in p.execute()]
    eq("EXEC", got, [True, 2, "2"])


def case_watch(c, ctx):
    if ctx.cluster:
        raise Skip("RedisCluster has no WATCH")
    k = ctx.key("watched")
    c.set(k, "0")
    other = ctx.client()
    p = c.pipeline(transaction=True)
    p.watch(k)
    other.set(k, "changed")
    p.multi()
    p.set(k, "mine")
    try:
        p.execute()
        raise AssertionError("EXEC ran although the watched key changed")
    except redis.WatchError:
        pass
    p.reset()
    eq("value", c.get(k), "changed")


def case_script(c, ctx):
    k = ctx.key("script")
    src = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
    eq("EVAL", c.eval(src, 1, k, 3), 3)
    script = c.register_script(src)  # EVALSHA, falling back to EVAL on NOSCRIPT
    eq("EVALSHA", script(keys=[k], args=[4]), 7)
    sha = c.script_load("return ARGV[1]")
    eq("SCRIPT LOAD + EVALSHA", c.evalsha(sha, 0, "x"), "x")


def _pubsub_roundtrip(c, ctx, sharded):
    ch = ctx.key("chan" + ("-s" if sharded else ""))
    p = c.pubsub()
    if sharded and ctx.asyncio:
        raise Skip("redis.asyncio's PubSub has no sharded pub/sub (get_sharded_message)")
    (p.ssubscribe if sharded else p.subscribe)(ch)
    getter = (p.get_sharded_message if sharded else p.get_message)
    deadline = time.monotonic() + TIMEOUT
    kinds = []
    while "ssubscribe" not in kinds and "subscribe" not in kinds:
        m = getter(timeout=1.0)
        if m:
            kinds.append(m["type"])
        if time.monotonic() > deadline:
            raise AssertionError(f"no subscribe confirmation, got {kinds}")
    pub = ctx.client()
    n = (pub.spublish if sharded else pub.publish)(ch, "hello")
    eq("receivers", n, 1)
    while True:
        m = getter(ignore_subscribe_messages=True, timeout=1.0)
        if m:
            eq("message", (m["channel"], m["data"]), (ch, "hello"))
            break
        if time.monotonic() > deadline:
            raise AssertionError("message not received")
    (p.sunsubscribe if sharded else p.unsubscribe)(ch)
    p.close()


def case_pubsub(c, ctx):
    _pubsub_roundtrip(c, ctx, False)


def case_sharded_pubsub(c, ctx):
    _pubsub_roundtrip(c, ctx, True)


def case_blocking_pop(c, ctx):
    k = ctx.key("blk")
    eq("BLPOP on empty, short timeout", c.blpop([k], timeout=0.2), None)
    pusher = ctx.client()
    if ctx.asyncio:
        async def both():
            async def push():
                await asyncio.sleep(0.2)
                await pusher._obj.rpush(k, "late")
            got, _ = await asyncio.gather(c._obj.blpop([k], timeout=TIMEOUT), push())
            return got
        got = ctx.loop.run_until_complete(both())
    else:
        t = threading.Timer(0.2, lambda: pusher.rpush(k, "late"))
        t.start()
        got = c.blpop([k], timeout=TIMEOUT)
        t.join()
    eq("BLPOP woken by a push", tuple(got) if got else got, (k, "late"))


def case_scan(c, ctx):
    keys = {ctx.key(f"scan:{i}") for i in range(60)}
    for k in keys:
        c.set(k, "1")
    if ctx.asyncio:
        async def collect():
            return {k async for k in c._obj.scan_iter(match=ctx.key("scan:*"), count=25)}
        got = ctx.loop.run_until_complete(collect())
    else:
        got = set(c.scan_iter(match=ctx.key("scan:*"), count=25))
    eq("SCAN MATCH", got, keys)


def case_concurrent(c, ctx):
    def worker(i, client):
        for j in range(40):
            k = ctx.key(f"conc:{i}:{j}")
            client.set(k, f"{i}-{j}")
            eq("GET", client.get(k), f"{i}-{j}")

    if ctx.asyncio:
        async def aworker(i):
            for j in range(40):
                k = ctx.key(f"conc:{i}:{j}")
                await c._obj.set(k, f"{i}-{j}")
                eq("GET", await c._obj.get(k), f"{i}-{j}")
        async def all_of_them():
            await asyncio.gather(*(aworker(i) for i in range(20)))
        ctx.loop.run_until_complete(all_of_them())
        return
    errors = []

    def run(i):
        try:
            worker(i, c)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    threads = [threading.Thread(target=run, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eq("errors from 20 threads", errors[:3], [])


def case_big_value(c, ctx):
    k = ctx.key("big")
    v = base64.b64encode(os.urandom(3 * 512 * 1024)).decode()  # 2 MiB of text
    eq("SET 2MB", c.set(k, v), True)
    eq("STRLEN", c.strlen(k), len(v))
    eq("GET 2MB", c.get(k) == v, True)


def case_health(c, ctx):
    eq("PING", c.ping(), True)
    info = c.info()
    if "redis_version" not in info:
        raise AssertionError(f"INFO without redis_version: {sorted(info)[:10]}")
    c.set(ctx.key("health"), "1")
    ks = c.info("keyspace")
    if ks.get("db0", {}).get("keys", 0) < 1:
        raise AssertionError(f"INFO keyspace: {ks}")


def case_info_role_master(c, ctx):
    eq("INFO replication role", c.info("replication").get("role"), "master")


def case_replica_read(c, ctx):
    k = ctx.key("ro")
    c.set(k, "seen")
    if ctx.cluster:
        r = ctx.client(read_from_replicas=True)
    else:
        r = ctx.client()
        eq("READONLY", r.execute_command("READONLY"), True)
    eq("read", r.get(k), "seen")


def case_wait_replica(c, ctx):
    if ctx.cluster:
        raise Skip("RedisCluster sends WAIT to a random node; checked with the plain clients")
    c.set(ctx.key("wait"), "1")
    n = c.execute_command("WAIT", 1, 0)
    if not (isinstance(n, int) and n >= 1):
        raise AssertionError(f"WAIT 1 0 answered {n!r}")


def case_keyspace_all_masters(c, ctx):
    if ctx.asyncio or ctx.cluster:
        raise Skip("checked with the plain sync client")
    p = c.pubsub()
    p.psubscribe(f"__keyspace@0__:*{ctx.key('ks')}")
    # {b}, {c}, {a}: slots 3300, 7365, 15495, one on each master of an even 3-way split.
    keys = [f"{{{t}}}{ctx.key('ks')}" for t in "bca"]
    deadline = time.monotonic() + TIMEOUT
    while not p.get_message(timeout=1.0):
        if time.monotonic() > deadline:
            raise AssertionError("no psubscribe confirmation")
    for k in keys:
        c.set(k, "1")
    seen = set()
    while seen != set(keys) and time.monotonic() < deadline:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if m:
            seen.add(m["channel"].split(":", 1)[1])
    p.close()
    eq("keys with events", sorted(seen), sorted(keys))


CASES = [
    ("handshake", case_handshake), ("string", case_string), ("hash", case_hash),
    ("list", case_list), ("set", case_set), ("zset", case_zset), ("stream", case_stream),
    ("hyperloglog", case_hyperloglog), ("geo", case_geo), ("bitmap", case_bitmap),
    ("crossslot-multikey", case_crossslot_multikey), ("pipeline-160", case_pipeline),
    ("multi-exec", case_multi_exec), ("watch", case_watch), ("script", case_script),
    ("pubsub", case_pubsub), ("sharded-pubsub", case_sharded_pubsub),
    ("blocking-pop", case_blocking_pop), ("scan", case_scan),
    ("concurrent-20", case_concurrent), ("big-value-2mb", case_big_value),
    ("health", case_health), ("replica-read", case_replica_read),
    ("info-role-master", case_info_role_master), ("wait-replica", case_wait_replica),
    ("keyspace-all-masters", case_keyspace_all_masters),
]


class Ctx:
    """One mode: how to make its clients and name its keys."""

    def __init__(self, mode, proto):
        self.mode, self.proto = mode, proto
        self.cluster = mode == "cluster"
        self.asyncio = mode == "asyncio"
        self.loop = asyncio.new_event_loop() if self.asyncio else None
        self.made = []

    def client(self, **kw):
        kw = dict(host=HOST, port=PORT, protocol=self.proto, decode_responses=True,
                  socket_timeout=TIMEOUT + 5, **kw)
        if self.cluster:
            c = redis.RedisCluster(**kw)
        elif self.asyncio:
            c = Awaiting(redis.asyncio.Redis(**kw), self.loop)
        else:
            c = redis.Redis(**kw)
        self.made.append(c)
        return c

    def key(self, name):
        return f"{PREFIX}:{self.mode}:r{self.proto}:{name}"

    def tagged(self, name):
        return "{" + self.key(name) + "}"

    def close(self):
        for c in self.made:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        if self.loop:
            self.loop.close()


def run_mode(mode, proto):
    ctx = Ctx(mode, proto)
    try:
        c = ctx.client()
    except Exception as e:  # noqa: BLE001
        print(f"FAIL redis-py/{mode}/resp{proto}/connect: {e!r}", flush=True)
        return
    for name, fn in CASES:
        label = f"redis-py/{mode}/resp{proto}/{name}"
        try:
            fn(c, ctx)
            print(f"PASS {label}", flush=True)
        except Skip as e:
            print(f"SKIP {label}: {e}", flush=True)
        except Exception as e:  # noqa: BLE001 - any error fails the case, not the program
            where = traceback.extract_tb(e.__traceback__)[-1].lineno
            detail = f"{type(e).__name__}: {e} (line {where})".replace("\n", " ")
            print(f"FAIL {label}: {detail}", flush=True)
    ctx.close()


def main():
    warnings.simplefilter("ignore")
    for mode in ("sync", "asyncio", "cluster"):
        for proto in (2, 3):
            run_mode(mode, proto)
    return 0


if __name__ == "__main__":
    sys.exit(main())

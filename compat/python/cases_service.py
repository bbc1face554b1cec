"""redis-py cases for the service side: pub/sub, blocking pops, SCAN, concurrency, big
values, health checks, replica reads, and the pending WAIT / keyspace / INFO cases. Each takes
(client, ctx); compat_py.py runs them."""

import asyncio
import base64
import os
import threading
import time

from checks import TIMEOUT, Skip, eq


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
    if not ctx.replicas:
        raise Skip("the servers have no replica")
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
    if not ctx.replicas:
        raise Skip("the servers have no replica")
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

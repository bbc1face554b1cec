"""redis-py cases for the data side: handshake, every data type, multi-key commands across
slots, pipelines, transactions and scripts. Each takes (client, ctx); compat_py.py runs them."""

import redis

from checks import Skip, eq


def case_handshake(c, ctx):
    eq("PING", c.ping(), True)
    # RedisCluster routes keyless commands only when told which node: the default one.
    node = {"target_nodes": c.get_default_node()} if ctx.cluster else {}
    eq("ECHO", c.echo("hi", **node), "hi")
    if not ctx.cluster:
        eq("CLIENT SETNAME", c.client_setname("compat-py"), True)
        eq("CLIENT GETNAME", c.client_getname(), "compat-py")
    hello = c.execute_command("HELLO", ctx.proto, **node)
    hello = hello if isinstance(hello, dict) else dict(zip(hello[::2], hello[1::2], strict=True))
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
        raise Skip(f"no transactions in this client: {e}") from e
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

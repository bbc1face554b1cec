"""The differential test's script generator: random, seeded scripts over the command
families (FAMILIES), on a few connections whose mode (RESP2/3, subscribed, MULTI, closed) it
tracks (ConnModel) only to pick plausible commands; what each command answers comes from the
reference's replies, never from this model."""

import collections
import random

from .script import MULTI_PASS, Cmd, Script, Step

FAMILIES = collections.OrderedDict([
    ("strings", "SET/GET/INCR/APPEND/GETRANGE/SETRANGE/STRLEN/GETDEL/SETNX (one key)"),
    ("multikey", "MGET/MSET/DEL/EXISTS/UNLINK/TOUCH over many slots (split by the proxy), KEYS"),
    ("lists", "LPUSH/RPUSH/LRANGE/LPOP/RPOP/LLEN/LINDEX/LMOVE"),
    ("blocking", "BLPOP/BRPOP on one key, 10-20 ms timeouts, on lists with or without data"),
    ("tagged", "multi-key commands on {hashtag} keys of one slot: MSETNX, LMOVE, 2-key EVAL,"
               " BRPOP on 2 keys, BLMOVE"),
    ("hashes", "HSET/HGET/HMGET/HINCRBY/HDEL/HLEN/HGETALL/HKEYS/HVALS"),
    ("sets", "SADD/SREM/SISMEMBER/SCARD/SMEMBERS"),
    ("zsets", "ZADD/ZRANGE/ZSCORE/ZINCRBY/ZRANK/ZCARD"),
    ("expiry", "EXPIRE/PEXPIRE/TTL/PTTL/PERSIST/SET EX"),
    ("scripts", "EVAL with keys in one slot"),
    ("errors", "wrong arity, WRONGTYPE, unknown command, bad integers"),
    ("inline", "inline (non-multibulk) commands"),
    ("ping", "PING/ECHO"),
    ("client", "CLIENT SETNAME/GETNAME/ID"),
    ("big", "3-6 MiB values"),
    ("deep", "pipelines of 100-200 commands"),
    ("tx", "MULTI/EXEC/DISCARD"),
    ("watch", "WATCH/UNWATCH with another connection touching the key or not"),
    ("pubsub", "SUBSCRIBE/PSUBSCRIBE/(P)UNSUBSCRIBE/PUBLISH"),
    ("shard", "SSUBSCRIBE/SUNSUBSCRIBE/SPUBLISH"),
    ("reset", "RESET from plain, subscribed (RESP2/3), MULTI and WATCH modes"),
    ("quit", "QUIT mid-pipeline, then a fresh connection"),
    ("hello", "HELLO 2/3 mid-session"),
    ("hot", "a few keys read again and again from every connection, written between the reads"
            " by one of them (what the near cache serves, docs/hotkeys.md)"),
])
ATOM_FAMILIES = ["strings", "multikey", "lists", "blocking", "tagged", "hashes", "sets", "zsets",
                 "expiry", "scripts", "errors", "inline", "ping", "client"]
WEIGHTS = {f: 3 for f in ATOM_FAMILIES}
WEIGHTS.update(big=0.25, deep=0.5, tx=2, watch=2, pubsub=2.5, shard=1.5, reset=2, quit=1,
               hello=1.5, ping=1, client=1, inline=1.5, hot=2)

STR_KEYS = ["s0", "s1", "s2", "s3", "s4", "s5", "{a}s0", "{a}s1"]
CTR_KEYS = ["n0", "n1", "n2", "{a}n0"]
LIST_KEYS = ["l0", "l1", "l2", "{a}l0", "{a}l1"]
HASH_KEYS = ["h0", "h1", "{a}h0"]
SET_KEYS = ["S0", "S1", "{a}S0"]
ZSET_KEYS = ["z0", "z1", "{a}z0"]
TX_KEYS = {k: "{b}" + k for k in ("x", "y", "n", "l", "h", "s", "w")}
Q_KEYS = ["{a}q", "{a}q2"]
BIG_KEYS = ["big0", "big1"]
HOT_KEYS = ["hot0", "hot1", "{a}hot"]
CHANNELS = ["ch0", "ch1", "ch2", "ch3"]
PATTERNS = ["ch*", "ch[12]", "n*", "*3"]
SHARD_GROUPS = [["{sc}a", "{sc}b", "{sc}c"], ["{sd}a", "{sd}b"]]
ALL_KEYS = (STR_KEYS + CTR_KEYS + LIST_KEYS + HASH_KEYS + SET_KEYS + ZSET_KEYS
            + list(TX_KEYS.values()) + Q_KEYS + BIG_KEYS + HOT_KEYS + ["{d}k", "{d}ctr"]
            + [c for g in SHARD_GROUPS for c in g])

SUB_ALLOWED = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE",
               "SUNSUBSCRIBE", "PING", "QUIT", "RESET"}


def C(*args, inline=False):
    return Cmd(list(args), inline)


class ConnModel:
    """What the generator believes about a connection (only used to pick plausible commands;
    frame counts come from the reference's replies)."""

    def __init__(self):
        self.resp = 2
        self.subs = {"ch": set(), "pat": set(), "sh": set()}
        self.multi = False
        self.closed = False

    def subscribed(self):
        return any(self.subs.values())

    def resp2sub(self):
        return self.resp == 2 and self.subscribed()


class Gen:
    def __init__(self, rng, families, resp3_share):
        self.r = rng
        self.fams = families
        self.atom_fams = [f for f in ATOM_FAMILIES if f in families] or ["strings"]
        self.resp3_share = resp3_share
        self.nconn = 3 if rng.random() < 0.3 else 2
        self.m = [ConnModel() for _ in range(self.nconn)]
        self.steps = []
        self.seq = 0

    # -- plumbing --

    def emit(self, c, cmds):
        if not cmds:
            return
        self.ensure_open(c)
        self.steps.append(Step(c, cmds))
        for cmd in cmds:
            self.sim(c, cmd)

    def sim(self, c, cmd):
        m, n, a = self.m[c], cmd.name, cmd.args[1:]
        if m.closed:
            return
        if m.resp2sub() and n not in SUB_ALLOWED:
            return
        if m.multi and n not in MULTI_PASS:
            return
        kinds = {"SUBSCRIBE": "ch", "PSUBSCRIBE": "pat", "SSUBSCRIBE": "sh"}
        unkinds = {"UNSUBSCRIBE": "ch", "PUNSUBSCRIBE": "pat", "SUNSUBSCRIBE": "sh"}
        if n in kinds:
            m.subs[kinds[n]] |= set(a)
        elif n in unkinds:
            if a:
                m.subs[unkinds[n]] -= set(a)
            else:
                m.subs[unkinds[n]].clear()
        elif n == "HELLO" and a and a[0] in (b"2", b"3"):
            m.resp = int(a[0])
        elif n == "RESET":
            self.m[c] = ConnModel()
        elif n == "QUIT":
            m.closed = True
        elif n == "MULTI":
            m.multi = True
        elif n in ("EXEC", "DISCARD"):
            m.multi = False

    def ensure_open(self, c):
        if self.m[c].closed:
            self.steps.append(Step(c, [], reconnect=True))
            self.m[c] = ConnModel()
            if self.r.random() < self.resp3_share:
                self.emit(c, [C("HELLO", "3")])

    def pick(self, exclude=(), plain=False):
        """A connection; plain=True prefers one that is neither RESP2-subscribed nor in MULTI."""
        cands = [c for c in range(self.nconn) if c not in exclude]
        if plain:
            good = [c for c in cands
                    if not (self.m[c].resp2sub() or self.m[c].multi) or self.m[c].closed]
            if good and self.r.random() < 0.9:
                cands = good
        c = self.r.choice(cands)
        self.ensure_open(c)
        return c

    def size(self):
        x = self.r.random()
        if x < 0.55:
            return 1
        if x < 0.8:
            return self.r.randint(2, 4)
        if x < 0.95:
            return self.r.randint(5, 15)
        return self.r.randint(16, 40)

    def val(self):
        x = self.r.random()
        if x < 0.5:
            return f"v{self.r.randrange(1000)}"
        if x < 0.8:
            return str(self.r.randrange(-5, 100))
        if x < 0.88:
            return ""
        if x < 0.94:
            return "a b\x00\xff"
        return "x" * self.r.randrange(1, 300)

    def payload(self, publisher):
        self.seq += 1
        return f"c{publisher}:{self.seq}:{self.r.choice(['', 'x', 'hello world'])}"

    def fill(self, c, k, fam=None):
        """k commands that suit connection c's mode."""
        m, out = self.m[c], []
        while len(out) < k:
            if m.multi:
                out += self.tx_atom()
            elif m.resp2sub():
                x = self.r.random()
                if x < 0.5:
                    out.append(C("PING"))
                elif x < 0.8:
                    out.append(C("PING", self.r.choice(["x", "hi there"])))
                else:  # refused in RESP2 subscribed mode: Redis's own error text
                    out += self.atom(self.r.choice(self.atom_fams))[:1]
            else:
                f = fam if fam and self.r.random() < 0.7 else self.r.choice(self.atom_fams)
                out += self.atom(f)
        return out

    def atom(self, fam):
        return getattr(self, "a_" + fam)()

    # -- atoms: short command sequences for a connection in normal mode --

    def a_strings(self):
        r, k, v = self.r, self.r.choice(STR_KEYS), self.val()
        n = r.choice(CTR_KEYS)
        return r.choice([
            lambda: [C("SET", k, v)],
            lambda: [C("SET", k, v, r.choice(["NX", "XX", "GET"]))],
            lambda: [C("GET", k)],
            lambda: [C("INCR", n)],
            lambda: [C("INCRBY", n, r.randrange(-10, 10))],
            lambda: [C("DECR", n)],
            lambda: [C("INCRBYFLOAT", n, r.choice(["1.5", "-0.25", "3"]))],
            lambda: [C("APPEND", k, v)],
            lambda: [C("GETRANGE", k, *r.choice([("0", "3"), ("-3", "-1"), ("2", "100")]))],
            lambda: [C("SETRANGE", k, r.randrange(0, 20), v or "z")],
            lambda: [C("STRLEN", k)],
            lambda: [C("GETDEL", k)],
            lambda: [C("SETNX", k, v)],
            lambda: [C("GETSET", k, v)],
        ])()

    def a_tagged(self):
        r, v, t = self.r, self.val(), self.r.choice(["0.01", "0.02"])
        return r.choice([
            lambda: [C("MSETNX", "{a}s0", v, "{a}s1", self.val())],
            lambda: [C("MSETNX", "{a}s0", v, "{a}n0", "1")],
            lambda: [C("LMOVE", "{a}l0", "{a}l1", r.choice(["LEFT", "RIGHT"]),
                       r.choice(["LEFT", "RIGHT"]))],
            lambda: [C("EVAL", "return {redis.call('INCR', KEYS[1]), redis.call('GET', KEYS[2])}",
                       2, "{a}n0", "{a}s0")],
            lambda: [C("RPUSH", "{a}q2", "e"), C("BRPOP", "{a}q", "{a}q2", t)],
            lambda: [C("BRPOP", "{a}q", "{a}q2", t)],
            lambda: [C("BLMOVE", "{a}q", "{a}q2", "LEFT", "RIGHT", t)],
            lambda: [C("MGET", "{a}s0", "{a}s1", "{a}n0")],
        ])()

    def a_multikey(self):
        r = self.r
        pool = STR_KEYS + CTR_KEYS
        anyk = pool + LIST_KEYS + HASH_KEYS + SET_KEYS
        ks = lambda p, lo, hi: [r.choice(p) for _ in range(r.randint(lo, hi))]  # noqa: E731
        x = r.random()
        if x < 0.25:
            args = []
            for k in ks(pool, 1, 5):
                args += [k, self.val()]
            return [C("MSET", *args)]
        if x < 0.5:
            return [C("MGET", *ks(pool + LIST_KEYS, 1, 7))]
        if x < 0.9:
            return [C(r.choice(["DEL", "EXISTS", "UNLINK", "TOUCH"]), *ks(anyk, 1, 5))]
        return [C("KEYS", r.choice(["s*", "*", "{a}*", "n?"]))]

    def a_lists(self):
        r, k = self.r, self.r.choice(LIST_KEYS)
        vs = [self.val() or "e" for _ in range(r.randint(1, 3))]
        return r.choice([
            lambda: [C(r.choice(["LPUSH", "RPUSH"]), k, *vs)],
            lambda: [C("LRANGE", k, *r.choice([("0", "-1"), ("1", "2"), ("-2", "-1")]))],
            lambda: [C(r.choice(["LPOP", "RPOP"]), k)],
            lambda: [C("LPOP", k, r.randint(1, 3))],
            lambda: [C("LLEN", k)],
            lambda: [C("LINDEX", k, r.randrange(-2, 3))],
            lambda: [C("LREM", k, 0, vs[0])],
            lambda: [C("LTRIM", k, 0, r.randint(1, 5))],
        ])()

    def a_blocking(self):
        r, q = self.r, self.r.choice(Q_KEYS)
        t = r.choice(["0.01", "0.02"])
        return r.choice([
            lambda: [C("RPUSH", q, self.val() or "e"), C("BLPOP", q, t)],
            lambda: [C("BLPOP", q, t)],
            lambda: [C("LPUSH", "l0", "b"), C("BRPOP", "l0", t)],
            lambda: [C("BLPOP", "l1", t)],
        ])()

    def a_hashes(self):
        r, k = self.r, self.r.choice(HASH_KEYS)
        f = lambda: f"f{r.randrange(5)}"  # noqa: E731
        return r.choice([
            lambda: [C("HSET", k, f(), self.val())],
            lambda: [C("HSET", k, f(), self.val(), f(), self.val())],
            lambda: [C("HGET", k, f())],
            lambda: [C("HMGET", k, f(), f(), f())],
            lambda: [C("HINCRBY", k, f(), r.randrange(-3, 5))],
            lambda: [C("HDEL", k, f())],
            lambda: [C("HLEN", k)],
            lambda: [C("HGETALL", k)],
            lambda: [C(r.choice(["HKEYS", "HVALS"]), k)],
            lambda: [C("HEXISTS", k, f())],
            lambda: [C("HSETNX", k, f(), self.val())],
        ])()

    def a_sets(self):
        r, k = self.r, self.r.choice(SET_KEYS)
        mem = lambda: r.choice(["m0", "m1", "m2", "m3", "1", "2", "30"])  # noqa: E731
        return r.choice([
            lambda: [C("SADD", k, *[mem() for _ in range(r.randint(1, 3))])],
            lambda: [C("SREM", k, mem())],
            lambda: [C("SISMEMBER", k, mem())],
            lambda: [C("SMISMEMBER", k, mem(), mem())],
            lambda: [C("SCARD", k)],
            lambda: [C("SMEMBERS", k)],
        ])()

    def a_zsets(self):
        r, k = self.r, self.r.choice(ZSET_KEYS)
        mem = lambda: f"m{r.randrange(5)}"  # noqa: E731
        sc = lambda: r.choice(["1", "2.5", "-3", "0", "1e3", "7"])  # noqa: E731
        return r.choice([
            lambda: [C("ZADD", k, sc(), mem())],
            lambda: [C("ZADD", k, sc(), mem(), sc(), mem())],
            lambda: [C("ZRANGE", k, "0", "-1")],
            lambda: [C("ZRANGE", k, "0", "-1", "WITHSCORES")],
            lambda: [C("ZSCORE", k, mem())],
            lambda: [C("ZINCRBY", k, r.choice(["1.5", "2", "-1"]), mem())],
            lambda: [C("ZRANK", k, mem())],
            lambda: [C("ZCARD", k)],
            lambda: [C("ZREM", k, mem())],
            lambda: [C("ZRANGEBYSCORE", k, "-inf", "+inf", "WITHSCORES")],
        ])()

    def a_expiry(self):
        r = self.r
        k = r.choice(STR_KEYS + LIST_KEYS[:2] + HASH_KEYS[:1])
        # TTLs set are multiples of 20 s; those compared by GT/LT are 10 s off them. Equal or
        # near TTLs would make GT/LT's answer depend on the time between the two commands,
        # which the proxy (a redirect, a failover hold) may stretch by seconds.
        ttl = lambda: 20 * r.randint(3, 25)  # noqa: E731
        return r.choice([
            lambda: [C("SET", k, self.val(), "EX", ttl())],
            lambda: [C("SET", k, self.val(), "PX", ttl() * 1000)],
            lambda: [C("EXPIRE", k, ttl())],
            lambda: [C("EXPIRE", k, ttl() + 10, r.choice(["NX", "XX", "GT", "LT"]))],
            lambda: [C("PEXPIRE", k, ttl() * 1000)],
            lambda: [C("TTL", k)],
            lambda: [C("PTTL", k)],
            lambda: [C("PERSIST", k)],
            lambda: [C("EXPIRE", k, r.choice(["0", "-1"]))],
            lambda: [C("SETEX", k, ttl(), self.val())],
        ])()

    def a_scripts(self):
        r = self.r
        return r.choice([
            lambda: [C("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", 1,
                       r.choice(STR_KEYS), self.val())],
            lambda: [C("EVAL", "return redis.call('LPUSH', KEYS[1], ARGV[1])", 1,
                       r.choice(["{a}l0", "{a}s0"]), "e")],
            lambda: [C("EVAL", "return redis.pcall('NOSUCHCMD')", 0)],
            lambda: [C("EVAL", "return {1, 'a', {2, 3.99}, redis.status_reply('FINE'), false}", 0)],
            lambda: [C("EVAL", "return ARGV[1]", 0, self.val())],
            lambda: [C("EVAL", "return redis.call('GET', KEYS[1])", 1, r.choice(STR_KEYS))],
            lambda: [C("EVAL", "return redis.error_reply('MY custom')", 0)],
        ])()

    def a_errors(self):
        r = self.r
        return r.choice([
            lambda: [C("GET")],
            lambda: [C("SET", r.choice(STR_KEYS))],
            lambda: [C("NOSUCHCMD", "a", "b")],
            lambda: [C("nosuch")],
            lambda: [C("INCRBY", r.choice(CTR_KEYS), "abc")],
            lambda: [C("LRANGE", "l0", "x", "1")],
            lambda: [C("EXPIRE", "s0", "notint")],
            lambda: [C("SET", "s0", "v", "EX", "-5")],
            lambda: [C("HINCRBY", "h0", "f0", "1.5")],
            lambda: [C("ZADD", "z0", "notafloat", "m")],
            lambda: [C("SET", "{a}s0", "v"), C("LPUSH", "{a}s0", "x")],
            lambda: [C("SET", "s1", "abc"), C("INCR", "s1")],
            lambda: [C("GET", r.choice(LIST_KEYS + HASH_KEYS))],
            lambda: [C("get", r.choice(STR_KEYS)), C("sEt", "s2", "mixed")],
            lambda: [C("")],
            lambda: [C("HGET", "h0", "f0", "extra")],
            lambda: [C("CLIENT", "NOSUCHSUB")],
            lambda: [C("PING", "a", "b")],
        ])()

    def a_inline(self):
        r = self.r
        return r.choice([
            lambda: [C("PING", inline=True)],
            lambda: [C("SET", r.choice(STR_KEYS), f"inl{r.randrange(100)}", inline=True)],
            lambda: [C("GET", r.choice(STR_KEYS), inline=True)],
            lambda: [C("ECHO", "hi", inline=True)],
            lambda: [C("INCR", r.choice(CTR_KEYS), inline=True)],
            lambda: [C("EXISTS", "s1", "s2", "n0", inline=True)],
            lambda: [C("SET", "s3", '"a b"', inline=True), C("GET", "s3")],
            lambda: [C("MGET", "s0", "s1", "s4", inline=True)],
        ])()

    def a_ping(self):
        r = self.r
        return r.choice([
            lambda: [C("PING")],
            lambda: [C("PING", self.val())],
            lambda: [C("ECHO", self.val())],
        ])()

    def a_client(self):
        r = self.r
        return r.choice([
            lambda: [C("CLIENT", "SETNAME", r.choice(["c-a", "name2", "x"]))],
            lambda: [C("CLIENT", "GETNAME")],
            lambda: [C("CLIENT", "ID")],
            lambda: [C("CLIENT", "SETNAME", "")],
            lambda: [C("CLIENT", "SETNAME", "a b")],
            lambda: [C("CLIENT", "SETNAME", "n1"), C("CLIENT", "GETNAME")],
        ])()

    def tx_atom(self):
        r, t = self.r, TX_KEYS
        return r.choice([
            lambda: [C("SET", t["x"], self.val())],
            lambda: [C("GET", t["x"])],
            lambda: [C("INCR", t["n"])],
            lambda: [C("APPEND", t["y"], self.val())],
            lambda: [C("LPUSH", t["l"], self.val() or "e")],
            lambda: [C("LRANGE", t["l"], 0, -1)],
            lambda: [C("HSET", t["h"], "f", self.val())],
            lambda: [C("HGETALL", t["h"])],
            lambda: [C("SADD", t["s"], r.choice(["a", "b", "c"]))],
            lambda: [C("SMEMBERS", t["s"])],
            lambda: [C("DEL", t["y"])],
            lambda: [C("MSET", t["x"], self.val(), t["y"], self.val())],
            lambda: [C("MGET", t["x"], t["y"])],
            lambda: [C("PING")],
            lambda: [C("ECHO", "in-tx")],
            lambda: [C("LPUSH", t["x"], "a")],  # WRONGTYPE at EXEC when x is a string
        ])()

    # -- step generators, one per family --

    def atom_step(self, fam):
        c = self.pick()
        self.emit(c, self.fill(c, self.size(), fam))

    def g_big(self):
        r = self.r
        c = self.pick(plain=True)
        size = r.randint(3 << 20, 6 << 20) if r.random() < 0.8 else r.randint(1 << 20, 3 << 20)
        big = (b"%07d|" % r.randrange(10 ** 7)) * (size // 8)
        k = r.choice(BIG_KEYS)
        if "hello" in self.fams and r.random() < 0.3:
            # request order across RESP2/RESP3 backend connections with a big value in flight
            self.emit(c, [C("SET", k, big), C("HELLO", "3"), C("STRLEN", k), C("HELLO", "2"),
                          C("SET", k, "small"), C("HELLO", "3"), C("GET", k)])
            return
        if "pubsub" in self.fams and r.random() < 0.25:
            # a RESP3 subscriber publishing to itself while big replies stream: the pushes
            # must come between frames, never inside a bulk
            ch = r.choice(CHANNELS)
            self.emit(c, [C("SET", k, big)])
            cmds = [C("HELLO", "3"), C("SUBSCRIBE", ch)]
            for _ in range(r.randint(2, 3)):
                cmds += [C("GET", k), C("PUBLISH", ch, self.payload(c))]
            self.emit(c, cmds + [C("GET", k), C("PING"), C("UNSUBSCRIBE")])
            return
        self.emit(c, [C("SET", k, big)] + r.choice([[], [C("STRLEN", k)], [C("GET", k)]]))
        if r.random() < 0.7:
            c2 = self.pick(plain=True)
            self.emit(c2, r.choice([
                [C("GET", k), C("PING")],
                [C("GETRANGE", k, 1000, 1010), C("APPEND", k, "tail"), C("STRLEN", k)],
                [C("GET", k), C("GET", k), C("STRLEN", k)],
            ]))

    def g_deep(self):
        r = self.r
        c = self.pick(plain=True)
        n = r.randint(100, 200)
        x = r.random()
        if x < 0.3:
            k = r.choice(STR_KEYS + ["{d}k"])
            cmds = [C("SET", k, i) for i in range(n)] + [C("GET", k)]
        elif x < 0.5:
            ctr = r.choice(CTR_KEYS + ["{d}ctr"])
            cmds = [C("INCR", ctr) for _ in range(n)]
        elif x < 0.65:
            cmds = []
            for i in range(n // 2):
                cmds += [C("SET", STR_KEYS[i % len(STR_KEYS)], i), C("INCR", "{d}ctr")]
            cmds.append(C("MGET", *STR_KEYS))
        else:
            fams = [f for f in self.atom_fams if f != "blocking"] or ["strings"]
            cmds = self.fill(c, n, r.choice(fams))
        self.emit(c, cmds)

    def g_tx(self):
        r = self.r
        c = self.pick(plain=True)
        pre = self.fill(c, r.randint(1, 2)) if r.random() < 0.3 else []
        body = []
        for _ in range(r.randint(1, 6)):
            body += self.tx_atom()
        if r.random() < 0.15:  # queue-time error: EXEC answers EXECABORT
            body.insert(r.randrange(len(body) + 1), r.choice([C("NOSUCHCMD"), C("GET"),
                                                              C("SET", TX_KEYS["x"])]))
        end = C("EXEC") if r.random() < 0.8 else C("DISCARD")
        x = r.random()
        if x < 0.1:
            # A command for every master beside at most one other: replayed at EXEC, each
            # master running it inside a transaction of its own (docs/commands.md).
            beside = C("SCRIPT", "EXISTS", "f" * 40, "0" * 40)
            self.emit(c, pre + [C("MULTI")] + self.tx_atom()[:1] + [beside, end])
        elif x < 0.55:
            self.emit(c, pre + [C("MULTI")] + body + [end])
        elif x < 0.8:
            cut = r.randint(0, len(body))
            self.emit(c, pre + [C("MULTI")] + body[:cut])
            if r.random() < 0.4:  # another client writes between the steps
                o = self.pick(exclude=[c], plain=True)
                self.emit(o, [C("SET", TX_KEYS["x"], "other")])
            self.emit(c, body[cut:] + [end])
        else:  # misuse: Redis's own errors
            self.emit(c, r.choice([
                [C("EXEC")], [C("DISCARD")],
                [C("MULTI"), C("MULTI"), C("SET", TX_KEYS["x"], "1"), end],
                [C("MULTI"), C("WATCH", TX_KEYS["x"]), C("GET", TX_KEYS["x"]), end],
            ]))
        if r.random() < 0.5:
            self.emit(self.pick(plain=True), [C("GET", TX_KEYS["x"]), C("LRANGE", TX_KEYS["l"], 0, -1)])

    def g_watch(self):
        r, t = self.r, TX_KEYS
        a = self.pick(plain=True)
        b = self.pick(exclude=[a], plain=True)
        watched = [t["x"]] + ([t["n"]] if r.random() < 0.3 else [])
        first = [C("SET", t["x"], "orig")] if r.random() < 0.5 else []
        first.append(C("WATCH", *watched))
        if r.random() < 0.4:
            first.append(C("GET", t["x"]))
        self.emit(a, first)
        x = r.random()
        if x < 0.15 and "blocking" in self.fams:
            self.emit(a, [C("BLPOP", r.choice(["l1", "{a}q"]), "0.01")])  # another node's conn
        elif x < 0.25 and "hello" in self.fams:
            self.emit(a, [C("HELLO", r.choice(["3", "2"]))])
        elif x < 0.35:
            self.emit(a, [C("GET", t["x"]), C("INCR", "n1")])
        who = r.random()
        if who < 0.35:
            self.emit(b, [C("SET", t["x"], "theirs")])  # touches the watched key: EXEC -> nil
        elif who < 0.5:
            self.emit(b, [C(r.choice(["DEL", "INCR"]), t[r.choice(["x", "n"])])])
        elif who < 0.65:
            self.emit(b, [C("SET", t["y"], "same-slot-other-key")])
        elif who < 0.75:
            self.emit(a, [C("SET", t["x"], "self")])  # own write also aborts the transaction
        elif who < 0.85:
            self.emit(a, [C("UNWATCH")])
            self.emit(b, [C("SET", t["x"], "theirs")])
        if self.m[a].resp2sub():
            return
        self.emit(a, [C("MULTI"), C("SET", t["x"], "mine"), C("INCR", t["n"]), C("EXEC")])
        self.emit(r.choice([a, b]), [C("GET", t["x"])])

    def g_hot(self):
        """Reads of the same keys from every connection, one step at a time, with writes
        of all kinds between them: a value the proxy kept must never outlive a write
        acknowledged before the read."""
        r = self.r
        writes = [
            lambda k: [C("SET", k, f"v{r.randint(0, 99)}")],
            lambda k: [C("INCR", k)],
            lambda k: [C("APPEND", k, "x")],
            lambda k: [C("DEL", k)],
            lambda k: [C("GETDEL", k)],
            lambda k: [C("EXPIRE", k, "100"), C("PERSIST", k)],
            lambda k: [C("SETRANGE", k, str(r.randint(0, 3)), "zz")],
            lambda k: [C("MSET", k, "m", r.choice(HOT_KEYS), "n")],
            lambda k: [C("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", k, "lua")],
        ]
        for _ in range(r.randint(4, 10)):
            c = self.pick(plain=True)
            k = r.choice(HOT_KEYS)
            if r.random() < 0.6:
                self.emit(c, [C("GET", k) for _ in range(r.randint(1, 3))])
            else:
                self.emit(c, r.choice(writes)(k) + [C("GET", k)])

    def _sub_step(self, s, kind, names):
        cmd = {"ch": "SUBSCRIBE", "pat": "PSUBSCRIBE", "sh": "SSUBSCRIBE"}[kind]
        return C(cmd, *names)

    def g_pubsub(self):
        r = self.r
        s = self.pick()
        if self.m[s].multi:
            self.emit(s, [C("DISCARD")])
        p = self.pick(exclude=[s], plain=True)
        chans = r.sample(CHANNELS, r.randint(1, 3))
        pats = r.sample(PATTERNS, r.randint(0, 2))
        if r.random() < 0.1:  # UNSUBSCRIBE without subscriptions (fresh or plain connection)
            self.emit(s, [C(r.choice(["UNSUBSCRIBE", "PUNSUBSCRIBE"]))]
                      + self.fill(s, r.randint(1, 2)))
            return
        cmds = self.fill(s, r.randint(1, 2)) if r.random() < 0.2 else []
        cmds.append(C("SUBSCRIBE", *chans))
        if pats and r.random() < 0.6:
            cmds.append(C("PSUBSCRIBE", *pats))
        self.emit(s, cmds)
        if r.random() < 0.4:  # commands pipelined right behind a subscription change
            self.steps[-1].cmds += self.fill(s, r.randint(1, 3))
            for cmd in self.steps[-1].cmds[len(cmds):]:
                self.sim(s, cmd)
        for _ in range(r.randint(1, 3)):
            x = r.random()
            if x < 0.55:
                pubs = [C("PUBLISH", r.choice(CHANNELS + ["other"]), self.payload(p))
                        for _ in range(r.randint(1, 4))]
                if r.random() < 0.3:
                    at = r.randrange(len(pubs) + 1)
                    pubs[at:at] = self.fill(p, 1)
                self.emit(p, pubs)
            elif x < 0.7:
                self.emit(s, [C(r.choice(["SUBSCRIBE", "UNSUBSCRIBE"]), r.choice(CHANNELS))]
                          + self.fill(s, r.randint(0, 2)))
            elif x < 0.8:
                self.emit(s, [C(r.choice(["PSUBSCRIBE", "PUNSUBSCRIBE"]), r.choice(PATTERNS))])
            elif x < 0.9:
                self.emit(s, self.fill(s, r.randint(1, 3)))
            elif self.nconn == 3:
                o = 3 - s - p
                self.emit(o, [C("SUBSCRIBE", r.choice(CHANNELS))])
        if r.random() < 0.7:
            end = [C("UNSUBSCRIBE")] if r.random() < 0.5 else [C("UNSUBSCRIBE", *chans)]
            if r.random() < 0.5:
                end.append(C("PUNSUBSCRIBE"))
            self.emit(s, end + self.fill(s, r.randint(0, 3)))
            if r.random() < 0.5:
                self.emit(p, [C("PUBLISH", r.choice(chans), self.payload(p))])

    def g_shard(self):
        r = self.r
        s = self.pick()
        if self.m[s].multi:
            self.emit(s, [C("DISCARD")])
        p = self.pick(exclude=[s], plain=True)
        group = r.choice(SHARD_GROUPS)
        chans = r.sample(group, r.randint(1, len(group)))
        if r.random() < 0.1:
            self.emit(s, [C("SUNSUBSCRIBE")] + self.fill(s, r.randint(1, 2)))
            return
        cmds = [C("SSUBSCRIBE", *chans)]
        if self.m[s].resp == 3 and r.random() < 0.3:
            cmds.append(C("SPUBLISH", chans[0], self.payload(s)))  # to itself, pipelined
        self.emit(s, cmds + (self.fill(s, r.randint(1, 2)) if r.random() < 0.3 else []))
        for _ in range(r.randint(1, 3)):
            x = r.random()
            if x < 0.6:
                self.emit(p, [C("SPUBLISH", r.choice(group), self.payload(p))
                              for _ in range(r.randint(1, 3))])
            elif x < 0.8:
                self.emit(s, [C(r.choice(["SSUBSCRIBE", "SUNSUBSCRIBE"]), r.choice(group))])
            else:
                self.emit(s, self.fill(s, r.randint(1, 2)))
        if r.random() < 0.7:
            end = [C("SUNSUBSCRIBE")] if r.random() < 0.5 else [C("SUNSUBSCRIBE", *chans)]
            self.emit(s, end + self.fill(s, r.randint(0, 3)))

    def g_reset(self):
        r, t = self.r, TX_KEYS
        c = self.pick()
        mode = r.choice(["plain", "sub2", "sub3", "multi", "watch"])
        after = lambda: self.fill(c, r.randint(1, 3))  # noqa: E731
        if mode == "plain":
            self.emit(c, [C("CLIENT", "SETNAME", "before-reset")]
                      + ([C("HELLO", "3")] if r.random() < 0.5 else []))
            self.emit(c, [C("RESET"), C("CLIENT", "GETNAME"), C("PING")])
        elif mode in ("sub2", "sub3"):
            pre = [C("HELLO", "3" if mode == "sub3" else "2")] if r.random() < 0.7 else []
            sub = [r.choice([C("SUBSCRIBE", "ch0"), C("SUBSCRIBE", "ch0", "ch1"),
                             C("PSUBSCRIBE", "ch*"), C("SSUBSCRIBE", "{sc}a"),
                             C("SSUBSCRIBE", "{sc}a", "{sc}b")])]
            if r.random() < 0.5:
                self.emit(c, pre + sub + [C("RESET")] + after())
            else:
                self.emit(c, pre + sub)
                self.emit(c, [C("RESET")] + after())
            if r.random() < 0.5:  # a message after RESET must not arrive
                p = self.pick(exclude=[c], plain=True)
                self.emit(p, [C("PUBLISH", "ch0", self.payload(p))])
        elif mode == "multi":
            self.emit(c, [C("MULTI"), C("SET", t["x"], "in-multi"), C("RESET"), C("EXEC"),
                          C("GET", t["x"])])
        else:
            self.emit(c, [C("SET", t["w"], "1"), C("WATCH", t["w"]), C("RESET")])
            o = self.pick(exclude=[c], plain=True)
            self.emit(o, [C("SET", t["w"], "2")])
            self.emit(c, [C("MULTI"), C("SET", t["w"], "3"), C("EXEC"), C("GET", t["w"])])

    def g_quit(self):
        r = self.r
        c = self.pick()
        mode = r.choice(["plain", "plain", "sub", "multi"])
        pre = self.fill(c, r.randint(0, 4))
        if mode == "sub" and not self.m[c].multi:
            pre += [C("SUBSCRIBE", "ch0")]
        elif mode == "multi" and not self.m[c].multi:
            pre += [C("MULTI"), C("SET", TX_KEYS["x"], "q")]
        tail = [C("SET", "s5", "after-quit"), C("PING")][: r.randint(0, 2)]
        self.emit(c, pre + [C("QUIT")] + tail)
        if r.random() < 0.5:
            o = self.pick(exclude=[c], plain=True)
            self.emit(o, [C("GET", "s5"), C("GET", TX_KEYS["x"])])

    def g_hello(self):
        r = self.r
        c = self.pick()
        opts = [["3"], ["2"], [], ["4"], ["3", "SETNAME", "hello-name"], ["2", "SETNAME", "h2"]]
        cmds = []

        def add(part):  # simulate as we go: later fillers depend on the protocol
            for x in part:
                self.sim(c, x)
            cmds.extend(part)
        for _ in range(r.randint(1, 3)):
            add(self.fill(c, r.randint(0, 2)))
            add([C("HELLO", *r.choice(opts))])
        add([C("CLIENT", "GETNAME")] if r.random() < 0.3 else [])
        add(self.fill(c, r.randint(0, 2)))
        self.steps.append(Step(c, cmds))

    def generate(self, fams):
        for c in range(self.nconn):
            if self.r.random() < self.resp3_share:
                self.emit(c, [C("HELLO", "3")])
        target = self.r.randint(3, 20)
        weights = [WEIGHTS[f] for f in fams]
        while len(self.steps) < target:
            f = self.r.choices(fams, weights)[0]
            if f in ATOM_FAMILIES:
                self.atom_step(f)
            else:
                getattr(self, "g_" + f)()


def generate(seed, index, families, resp3_share):
    rng = random.Random(f"{seed}:{index}")
    g = Gen(rng, families, resp3_share)
    g.generate([f for f in FAMILIES if f in families])
    for i, s in enumerate(g.steps):
        s.oidx = i
        for j, c in enumerate(s.cmds):
            c.oidx = j
    return Script(g.steps, seed, index)

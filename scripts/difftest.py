#!/usr/bin/env python3
"""Differential test: slotgate in front of a Redis Cluster must behave exactly like one Redis.

Starts a standalone redis-server (the reference), a local 3-master 1-replica cluster
(`slotgate cluster up`) and `slotgate proxy` in front of it. Generates random, seeded
scripts: a few connections (c0, c1, sometimes c2); each step is one write on one connection
holding a pipeline of 1..200 commands, then the read of that step's replies. Every script
runs against the reference and then against the proxy (each after FLUSHALL, on fresh
connections), and the reply streams are compared per connection, byte for byte except for
the few normalisations in NORMALISE/TOLERANCE below. Pub/sub messages are separated from
replies and compared at the end, per (receiver, publisher, channel), in order.

On a discrepancy it prints the first differing step with both replies, shrinks the script
(delta debugging, re-running both sides from FLUSHALL each time) and prints the minimal
reproduction plus a command line that reruns it. The last line is exactly
`difftest: N passed, M failed`; exit status 1 if M > 0. See docs/difftest.md.

    python3 scripts/difftest.py --scripts 300            # seed printed; random by default
    python3 scripts/difftest.py --seconds 100 --chaos-seconds 30
    python3 scripts/difftest.py --repro 1234:17 [--keep 0,3.1.2]   # one script, verbose

Python 3 standard library only (raw sockets, its own RESP2/RESP3 codec).
"""

import argparse
import atexit
import collections
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import faultinject

from slotgate_tools.ports import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
CRLF = b"\r\n"
STALL_S = 240  # watchdog: no script or shrink trial finished for this long -> abort


def log(*a):
    print(*a, flush=True)


# =======================================================================================
# RESP2/RESP3 codec. A frame is (type_char, value): simple types carry the line (bytes),
# bulk types bytes or None, aggregates a list of frames (maps and attributes flattened:
# k1, v1, k2, v2...), `_` None.


class Incomplete(Exception):
    pass


class ProtocolError(Exception):
    pass


def parse(buf, pos):
    """One frame from buf at pos -> (frame, end). Raises Incomplete if more bytes are needed."""
    if pos >= len(buf):
        raise Incomplete
    nl = buf.find(CRLF, pos + 1)
    if nl < 0:
        raise Incomplete
    c = chr(buf[pos])
    line = bytes(buf[pos + 1:nl])
    try:
        if c in "+-:,#(":
            return (c, line), nl + 2
        if c == "_":
            return ("_", None), nl + 2
        if c in "$!=":
            n = int(line)
            if n < 0:
                return (c, None), nl + 2
            end = nl + 2 + n
            if len(buf) < end + 2:
                raise Incomplete
            return (c, bytes(buf[nl + 2:end])), end + 2
        if c in "*~>%|":
            n = int(line)
            if n < 0:
                return (c, None), nl + 2
            items, p = [], nl + 2
            for _ in range(n * 2 if c in "%|" else n):
                f, p = parse(buf, p)
                items.append(f)
            if c == "|":  # an attribute annotates the frame that follows it
                f, p = parse(buf, p)
                return ("|", (items, f)), p
            return (c, items), p
    except ValueError:
        pass
    raise ProtocolError(f"bad frame start {bytes(buf[pos:pos + 40])!r}")


def encode(f):
    t, v = f
    tb = t.encode()
    if t in "+-:,#(":
        return tb + v + CRLF
    if t == "_":
        return b"_\r\n"
    if v is None:
        return tb + b"-1\r\n"
    if t in "$!=":
        return tb + str(len(v)).encode() + CRLF + v + CRLF
    if t == "|":
        attrs, inner = v
        return b"|%d\r\n" % (len(attrs) // 2) + b"".join(map(encode, attrs)) + encode(inner)
    n = len(v) // 2 if t == "%" else len(v)
    return tb + str(n).encode() + CRLF + b"".join(map(encode, v))


def show_bytes(b, limit=60):
    if len(b) > limit:
        return f"<{len(b)} bytes {b[:24]!r}…>"
    s = repr(b)[2:-1]
    return '"' + s.replace('"', '\\"') + '"'


def fmt(f, limit=300):
    """Compact human form of a frame: +OK -ERR.. :1 "bulk" nil [..] >[..] %{..} ~{..} _"""
    s = _fmt(f)
    return s if len(s) <= limit else s[:limit] + f"…({len(s)} chars)"


def _fmt(f):
    if f is None:
        return "(none)"
    t, v = f
    if t in "+-":
        return t + v.decode("utf-8", "replace")
    if t in ":,#(":
        return t + v.decode()
    if t == "_":
        return "_"
    if t == "$":
        return "nil" if v is None else show_bytes(v)
    if t in "!=":
        return t + ("nil" if v is None else show_bytes(v))
    if v is None:
        return t + "-1"
    if t == "|":
        return "|" + _fmt(("%", v[0])) + " " + _fmt(v[1])
    if t == "%":
        return "%{" + ", ".join(f"{_fmt(v[i])}: {_fmt(v[i + 1])}" for i in range(0, len(v), 2)) + "}"
    inner = ", ".join(_fmt(x) for x in v)
    return {"*": f"[{inner}]", ">": f">[{inner}]", "~": "~{" + inner + "}"}[t]


MSG_LEN = {b"message": 3, b"pmessage": 4, b"smessage": 3}
CONFIRM = {b"subscribe": ("ch", 1), b"unsubscribe": ("ch", -1), b"psubscribe": ("pat", 1),
           b"punsubscribe": ("pat", -1), b"ssubscribe": ("sh", 1), b"sunsubscribe": ("sh", -1)}


def head(f):
    """First element of an array/push frame if it is a string, else None."""
    t, v = f
    if t in "*>" and v and v[0][0] in "$+":
        return v[0][1]
    return None


def as_message(f):
    """A pub/sub message (kind, pattern, channel, payload), or None for anything else."""
    h = head(f)
    if h in MSG_LEN and len(f[1]) == MSG_LEN[h]:
        v = [x[1] for x in f[1]]
        if h == b"pmessage":
            return (h.decode(), v[1], v[2], v[3])
        return (h.decode(), None, v[1], v[2])
    return None


# =======================================================================================
# Normalisation: the ONLY places where the proxy may legitimately differ from one Redis.
# Everything else is compared byte for byte.


def _pairs(v):
    return [(v[i], v[i + 1]) for i in range(0, len(v) - 1, 2)]


def norm_hello(f):
    # HELLO describes the server: connection id, version, mode (standalone/cluster), role and
    # modules are properties of whoever answers; the keys, their order and `proto` must match.
    t, v = f
    if t not in "*%" or v is None:
        return f
    out = []
    for k, val in _pairs(v):
        if k[1] in (b"id", b"mode", b"role", b"version", b"modules"):
            val = ("+", b"<normalised>")
        out += [k, val]
    return (t, out)


def norm_zero_int(f):
    # CLIENT ID: ids are per server process.
    return (":", b"0") if f[0] == ":" else f


def norm_sorted(f):
    # Unordered collections (SMEMBERS, HKEYS, HVALS, KEYS): order depends on hash-table layout
    # and, for KEYS through the proxy, on which master answers first.
    t, v = f
    if t in "*~" and v is not None:
        return (t, sorted(v, key=encode))
    return f


def norm_sorted_pairs(f):
    # HGETALL: field/value pairs in hash-table order; compare the set of pairs.
    t, v = f
    if t in "*%" and v is not None and len(v) % 2 == 0:
        return (t, [x for p in sorted(_pairs(v), key=lambda p: encode(p[0]) + encode(p[1]))
                    for x in p])
    return f


NORMALISE = {
    "HELLO": norm_hello,
    "CLIENT ID": norm_zero_int,
    "SMEMBERS": norm_sorted,
    "HKEYS": norm_sorted,
    "HVALS": norm_sorted,
    "KEYS": norm_sorted,
    "HGETALL": norm_sorted_pairs,
}
# Remaining time to live is read at slightly different moments: TTL may differ by 1 s,
# PTTL by 1.5 s. Negative answers (-1 no expiry, -2 no key) must be equal.
TOLERANCE = {"TTL": 1, "PTTL": 1500}
# (P|S)UNSUBSCRIBE without arguments: Redis walks the client's subscription dict, so the
# channels come in hash-table order (random per process); compare the set of channels and
# the sequence of counts (see same_unsubscribe_all).
UNSUBSCRIBE_ALL = {"UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"}
# Opt-in relaxations (--relax), NOT on by default: they hide real differences.
#   publish-count: PUBLISH's receiver count only has to be an integer. Through the proxy it
#   counts the subscribers of the one master that got the PUBLISH; this class otherwise
#   masks every later pub/sub discrepancy of a script.
RELAXATIONS = {"publish-count"}
RELAXED = set()


def same_unsubscribe_all(a, b):
    def canon(frames):
        out = []
        for f in frames:
            if head(f) not in CONFIRM or len(f[1]) != 3:
                return None
            out.append(f)
        return ([(f[0], f[1][0], f[1][2]) for f in out],
                sorted(encode(f[1][1]) for f in out))
    ca = canon(a)
    return ca is not None and ca == canon(b)


def equal_frames(key, ctx, a, b):
    """a, b: parsed frames of one reply of command `key` (ctx: queued commands for EXEC)."""
    if key == "EXEC" and ctx and a[0] == b[0] == "*" and a[1] is not None and b[1] is not None:
        return len(a[1]) == len(b[1]) and all(
            equal_frames(c.key, None, x, y) for c, x, y in zip(ctx, a[1], b[1], strict=False))
    if key == "PUBLISH" and "publish-count" in RELAXED and a[0] == b[0] == ":":
        return True
    if key in TOLERANCE and a[0] == b[0] == ":":
        x, y = int(a[1]), int(b[1])
        return x == y or (x >= 0 and y >= 0 and abs(x - y) <= TOLERANCE[key])
    if key in NORMALISE:
        return encode(NORMALISE[key](a)) == encode(NORMALISE[key](b))
    return encode(a) == encode(b)


# =======================================================================================
# Commands and scripts


SUBCOMMANDS = {"CLIENT", "CLUSTER", "SCRIPT", "PUBSUB", "OBJECT", "CONFIG", "FUNCTION"}


class Cmd:
    __slots__ = ("args", "inline", "name", "key", "oidx")

    def __init__(self, args, inline=False):
        self.args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.inline = inline
        self.name = self.args[0].upper().decode("latin-1") if self.args else ""
        self.key = self.name
        if self.name in SUBCOMMANDS and len(self.args) > 1:
            self.key += " " + self.args[1].upper().decode("latin-1")
        self.oidx = None

    def wire(self):
        if self.inline:
            return b" ".join(self.args) + CRLF
        return b"*%d\r\n" % len(self.args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in self.args)

    def show(self):
        out = []
        for a in self.args:
            if len(a) > 64:
                out.append(f"<{len(a)} bytes>")
            elif a and re.fullmatch(rb"[A-Za-z0-9_:{}\-.*?\[\]|]+", a):
                out.append(a.decode())
            else:
                out.append(show_bytes(a))
        return " ".join(out) + (" (inline)" if self.inline else "")


class Step:
    __slots__ = ("conn", "cmds", "reconnect", "oidx")

    def __init__(self, conn, cmds, reconnect=False):
        self.conn, self.cmds, self.reconnect, self.oidx = conn, cmds, reconnect, None

    def wire(self):
        return b"".join(c.wire() for c in self.cmds)

    def show(self):
        if self.reconnect:
            return f"c{self.conn}: (reconnect: close and open a fresh connection)"
        return f"c{self.conn}> " + " ; ".join(c.show() for c in self.cmds)


class Script:
    def __init__(self, steps, seed=None, index=None):
        self.steps, self.seed, self.index = steps, seed, index

    def subset(self, keep):
        """keep: {orig step index: None (whole step) or set of orig cmd indexes}."""
        steps = []
        for s in self.steps:
            if s.oidx not in keep:
                continue
            sel = keep[s.oidx]
            cmds = s.cmds if sel is None else [c for c in s.cmds if c.oidx in sel]
            if not cmds and not s.reconnect:
                continue
            n = Step(s.conn, cmds, s.reconnect)
            n.oidx = s.oidx
            steps.append(n)
        return Script(steps, self.seed, self.index)

    def keep_spec(self, full):
        """The --keep argument selecting this script out of `full` (its unshrunk original)."""
        whole = {s.oidx: len(s.cmds) for s in full.steps}
        out = []
        for s in self.steps:
            if s.reconnect or len(s.cmds) == whole[s.oidx]:
                out.append(str(s.oidx))
            else:
                out.append(".".join([str(s.oidx)] + [str(c.oidx) for c in s.cmds]))
        return ",".join(out)

    def ncmds(self):
        return sum(len(s.cmds) for s in self.steps)

    def publishes(self):
        return any(c.name in ("PUBLISH", "SPUBLISH") for s in self.steps for c in s.cmds)

    def uses_pubsub(self):
        return any(c.name.endswith("SUBSCRIBE") for s in self.steps for c in s.cmds)

    def watched_slots(self):
        return {key_slot(a) for s in self.steps for c in s.cmds if c.name == "WATCH"
                for a in c.args[1:]}


def parse_keep(spec):
    keep = {}
    for tok in spec.split(","):
        tok = tok.strip()
        if not tok:
            continue
        parts = [int(x) for x in tok.split(".")]
        keep[parts[0]] = None if len(parts) == 1 else set(parts[1:])
    return keep


# =======================================================================================
# Generator

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
])
ATOM_FAMILIES = ["strings", "multikey", "lists", "blocking", "tagged", "hashes", "sets", "zsets",
                 "expiry", "scripts", "errors", "inline", "ping", "client"]
WEIGHTS = {f: 3 for f in ATOM_FAMILIES}
WEIGHTS.update(big=0.25, deep=0.5, tx=2, watch=2, pubsub=2.5, shard=1.5, reset=2, quit=1,
               hello=1.5, ping=1, client=1, inline=1.5)

STR_KEYS = ["s0", "s1", "s2", "s3", "s4", "s5", "{a}s0", "{a}s1"]
CTR_KEYS = ["n0", "n1", "n2", "{a}n0"]
LIST_KEYS = ["l0", "l1", "l2", "{a}l0", "{a}l1"]
HASH_KEYS = ["h0", "h1", "{a}h0"]
SET_KEYS = ["S0", "S1", "{a}S0"]
ZSET_KEYS = ["z0", "z1", "{a}z0"]
TX_KEYS = {k: "{b}" + k for k in ("x", "y", "n", "l", "h", "s", "w")}
Q_KEYS = ["{a}q", "{a}q2"]
BIG_KEYS = ["big0", "big1"]
CHANNELS = ["ch0", "ch1", "ch2", "ch3"]
PATTERNS = ["ch*", "ch[12]", "n*", "*3"]
SHARD_GROUPS = [["{sc}a", "{sc}b", "{sc}c"], ["{sd}a", "{sd}b"]]
ALL_KEYS = (STR_KEYS + CTR_KEYS + LIST_KEYS + HASH_KEYS + SET_KEYS + ZSET_KEYS
            + list(TX_KEYS.values()) + Q_KEYS + BIG_KEYS + ["{d}k", "{d}ctr"]
            + [c for g in SHARD_GROUPS for c in g])

SUB_ALLOWED = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE",
               "SUNSUBSCRIBE", "PING", "QUIT", "RESET"}
MULTI_PASS = {"EXEC", "DISCARD", "MULTI", "WATCH", "QUIT", "RESET"}


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
        if x < 0.55:
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


# =======================================================================================
# Connections and the runner


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


class Conn:
    def __init__(self, addr, timeout=5.0):
        self.sock = socket.create_connection(addr, timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.pos = 0
        self.eof = False
        self.closed = False
        self.timeout = timeout

    def close(self):
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _recv(self):
        try:
            data = self.sock.recv(4 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.buf += data
        else:
            self.eof = True

    def send(self, data):
        """Write everything, reading meanwhile so neither side can block on a full buffer."""
        view, off = memoryview(data), 0
        while off < len(view):
            r, w, _ = select.select([self.sock] if not self.eof else [], [self.sock], [],
                                    self.timeout)
            if not r and not w:
                raise Timeout("send")
            if r:
                self._recv()
            if w:
                try:
                    off += self.sock.send(view[off:off + (1 << 20)])
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    raise Closed(f"send: {e}") from None

    def frame(self, timeout=None):
        """Next frame (parsed, raw bytes). Timeout: no byte arrived for `timeout` seconds."""
        timeout = self.timeout if timeout is None else timeout
        while True:
            try:
                f, end = parse(self.buf, self.pos)
                raw = bytes(self.buf[self.pos:end])
                self.pos = end
                if self.pos > (1 << 20):
                    del self.buf[:self.pos]
                    self.pos = 0
                return f, raw
            except Incomplete:
                pass
            if self.eof:
                raise Closed("EOF")
            r, _, _ = select.select([self.sock], [], [], timeout)
            if not r:
                raise Timeout("read")
            self._recv()

    def call(self, *args):
        self.send(Cmd(list(args)).wire())
        return self.frame()[0]


class Reply:
    __slots__ = ("cmd", "frames", "status", "ctx", "quit")

    def __init__(self, cmd):
        self.cmd, self.frames, self.status, self.ctx, self.quit = cmd, [], "ok", None, False

    def show(self):
        s = " | ".join(fmt(f) for f, _ in self.frames) or "(nothing)"
        if self.status != "ok":
            s += {"timeout": " … no reply (timeout)", "eof": " … connection closed"}[self.status]
        return s


class Session:
    """One client connection in a run, with the pub/sub and MULTI state read from its replies."""

    def __init__(self, conn, name):
        self.conn, self.name = conn, name
        self.subs = {"ch": set(), "pat": set(), "sh": set()}
        self.multi = False
        self.queue = []
        self.quit = False
        self.broken = False
        self.messages = []
        self.last_cmd = None

    def expected(self, cmd):
        """Frames the reference sends for cmd, given the state so far (reference run only)."""
        n, a = cmd.name, cmd.args[1:]
        if self.multi and n not in MULTI_PASS:
            return 1
        if n in ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"):
            return max(1, len(a))
        kind = {"UNSUBSCRIBE": "ch", "PUNSUBSCRIBE": "pat", "SUNSUBSCRIBE": "sh"}.get(n)
        if kind:
            return len(a) if a else max(1, len(self.subs[kind]))
        return 1

    def reply_frame(self, timeout=None):
        while True:
            f, raw = self.conn.frame(timeout)
            msg = as_message(f)
            if msg:
                self.messages.append(msg)
                continue
            return f, raw

    def observe(self, cmd, f, rep):
        """Update the state from one reply frame."""
        h = head(f)
        if h in CONFIRM and len(f[1]) == 3:
            kind, sign = CONFIRM[h]
            name = f[1][1][1]
            if name is not None:
                (self.subs[kind].add if sign > 0 else self.subs[kind].discard)(name)
            return
        n = cmd.name
        if f == ("+", b"QUEUED"):
            self.queue.append(cmd)
        elif n == "MULTI" and f == ("+", b"OK"):
            self.multi = True
        elif n in ("EXEC", "DISCARD") and self.multi:
            rep.ctx = self.queue
            self.multi, self.queue = False, []
            if f[0] == "*" and f[1]:  # (un)subscribes inside EXEC change the state too
                for x in f[1]:
                    if head(x) in CONFIRM:
                        self.observe(cmd, x, Reply(cmd))
        elif n == "RESET" and f == ("+", b"RESET"):
            self.subs = {"ch": set(), "pat": set(), "sh": set()}
            self.multi, self.queue = False, []
        elif n == "QUIT" and f == ("+", b"OK"):
            self.quit = rep.quit = True

    def read_reply(self, cmd, count, timeout):
        rep = Reply(cmd)
        model = count is None
        if model:
            count = self.expected(cmd)
        k = 0
        while k < count:
            try:
                f, raw = self.reply_frame(timeout)
            except Timeout:
                rep.status = "timeout"
                break
            except Closed:
                rep.status = "eof"
                break
            rep.frames.append((f, raw))
            self.observe(cmd, f, rep)
            k += 1
            if model and k == 1 and f[0] == "-":
                break
        self.last_cmd = cmd
        return rep


class Diff:
    def __init__(self, kind, step=None, ci=None, cmd=None, ref=None, prx=None, detail=""):
        self.kind, self.step, self.ci, self.cmd = kind, step, ci, cmd
        self.ref, self.prx, self.detail = ref, prx, detail

    @property
    def signature(self):
        return f"{self.cmd.key if self.cmd else 'messages'}: {self.kind}"


def watch_lost_to_chaos(d, script, chaos):
    """The proxy's EXEC answered nil where the reference ran the transaction, and chaos has
    changed the owner of a watched slot (or failed a master over) before it: the WATCH was
    lost to the topology change, and EXEC answers nil by design (docs/commands.md), never
    runs unwatched. Any time before counts, not only during the script: the proxy may learn
    of an older move only when the WATCH meets its MOVED. Every other reply is compared, and
    the plain (no chaos) run compares WATCH scripts fully."""
    if chaos is None or d.cmd is None or d.cmd.key != "EXEC" or d.ref is None or d.prx is None:
        return False
    pf, rf = [f for f, _ in d.prx.frames], [f for f, _ in d.ref.frames]
    nil = lambda f: f[0] == "_" or (f[0] == "*" and f[1] is None)  # noqa: E731 RESP3, RESP2
    if len(pf) != 1 or len(rf) != 1 or not nil(pf[0]):
        return False
    if rf[0][0] != "*" or rf[0][1] is None:
        return False
    slots = script.watched_slots()
    return bool(slots) and chaos.changed(0.0, time.monotonic(), slots)


SHARD_PUBSUB = ("SPUBLISH", "SSUBSCRIBE", "SUNSUBSCRIBE")


def shard_slots(script):
    """The slots of the shard channels a script publishes to or (un)subscribes."""
    return {key_slot(a) for s in script.steps for c in s.cmds if c.name in SHARD_PUBSUB
            for a in (c.args[1:2] if c.name == "SPUBLISH" else c.args[1:])}


def shard_count_lost_to_chaos(d, script, started, chaos):
    """A sharded pub/sub count (SPUBLISH's receivers, SSUBSCRIBE/SUNSUBSCRIBE's totals) or
    a shard message differs, and chaos moved the slot of one of the script's shard channels
    (or failed a master over) while it ran. The node that loses a slot drops its shard
    subscriptions (`sunsubscribe` pushed), and until the proxy has subscribed again at the
    new owner a SPUBLISH there reaches no one: the window every Redis Cluster client has,
    inherent to sharded pub/sub across a slot move (docs/commands.md, "Shard subscriptions
    across failovers"). Counted apart, never hidden: the plain run compares these fully."""
    if chaos is None:
        return False
    if d.cmd is None:  # messages: only shard messages missing
        if d.kind != "messages missing" or getattr(d, "missing_kinds", None) != {"smessage"}:
            return False
    elif d.kind != "different value" or d.cmd.key not in SHARD_PUBSUB:
        return False
    slots = shard_slots(script)
    return bool(slots) and chaos.changed(started, time.monotonic(), slots)


def classify(ref, prx):
    if prx.status == "timeout":
        return "no reply"
    if prx.status == "eof":
        return "connection closed"
    if len(prx.frames) != len(ref.frames):
        return "different number of frames"
    if (ref.cmd.name in UNSUBSCRIBE_ALL and len(ref.cmd.args) == 1 and len(ref.frames) > 1
            and same_unsubscribe_all([f for f, _ in ref.frames], [f for f, _ in prx.frames])):
        return None
    for (a, _), (b, _) in zip(ref.frames, prx.frames, strict=False):
        if equal_frames(ref.cmd.key, ref.ctx, a, b):
            continue
        if b[0] in "-!$+" and b"slotgate" in (b[1] or b""):
            return "slotgate error" if b[0] in "-!" else f"slotgate reply ({fmt(b)[:30]})"
        if a[0] == "-" and b[0] == "-":
            return "different error"
        if a[0] == "-":
            return "value instead of error"
        if b[0] == "-":
            return "error instead of value"
        if a[0] != b[0]:
            return f"type {a[0]} vs {b[0]}"
        return "different value"
    return None


class RunResult:
    def __init__(self):
        self.steps = []  # per step: list of Reply (None for a reconnect step)
        self.messages = {}  # session name -> [messages]
        self.extras = []  # (session name, frame) replies nobody asked for
        self.diff = None
        self.harness = None
        self.eofs = {}  # (step, ci) -> True if the connection closed after QUIT


def group_messages(msgs):
    # a plain dict: equality ignores the interleaving of different (publisher, channel) groups
    # (OrderedDict's would not); only the order within one group must match
    g = {}
    for kind, pat, ch, payload in msgs:
        pub = payload.split(b":", 1)[0]
        g.setdefault((kind, pat, ch, pub), []).append(payload)
    return g


class Target:
    def __init__(self, name, addr, retry_s=0):
        self.name, self.addr, self.retry_s = name, addr, retry_s
        self.admin = None
        self.dirty_pubsub = False

    def call(self, *args):
        for attempt in range(3):
            try:
                if self.admin is None:
                    self.admin = Conn(self.addr, timeout=10)
                return self.admin.call(*args)
            except (OSError, Timeout, Closed, ProtocolError):
                if self.admin:
                    self.admin.close()
                self.admin = None
                if attempt == 2:
                    raise
                time.sleep(0.2)

    def prepare(self):
        """Wait until the previous script's subscriptions are gone, then FLUSHALL."""
        if self.dirty_pubsub:
            deadline = time.monotonic() + 3
            while True:
                left = self.leftover_subscriptions()
                if not left or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            if left:
                log(f"harness: {self.name} still has subscriptions 3 s after their clients"
                    f" closed: {left}")
            self.dirty_pubsub = False
        deadline = time.monotonic() + max(self.retry_s, 1)
        while True:
            with FLUSH_GUARD:
                f = self.call("FLUSHALL")
            if f == ("+", b"OK"):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"FLUSHALL on {self.name}: {fmt(f)}")
            time.sleep(0.2)

    def leftover_subscriptions(self):
        out = []
        f = self.call("PUBSUB", "NUMPAT")
        if f[0] == ":" and int(f[1]):
            out.append(f"{int(f[1])} patterns")
        for sub, names in (("NUMSUB", CHANNELS + ["other"]),
                           ("SHARDNUMSUB", [c for g in SHARD_GROUPS for c in g])):
            f = self.call("PUBSUB", sub, *names)
            if f[0] in "*%" and f[1]:
                for k, v in _pairs(f[1]):
                    if v[0] == ":" and int(v[1]):
                        out.append(f"{k[1].decode()}={int(v[1])}")
        return out


def run(target, script, ref=None, timeout=5.0, stop_on_diff=True, trace=None):
    """Run script on target. With ref (the reference's RunResult) compare as we go."""
    target.prepare()
    res = RunResult()
    sessions, gens = {}, collections.Counter()
    all_sessions = []
    if script.uses_pubsub():
        target.dirty_pubsub = True

    def session(c):
        if c not in sessions:
            s = Session(Conn(target.addr, timeout), f"c{c}" + (f"#{gens[c]}" if gens[c] else ""))
            sessions[c] = s
            all_sessions.append(s)
        return sessions[c]

    def fail(d):
        if res.diff is None:
            res.diff = d
        return stop_on_diff

    try:
        for si, step in enumerate(script.steps):
            if step.reconnect:
                if step.conn in sessions:
                    sessions.pop(step.conn).conn.close()
                    gens[step.conn] += 1
                res.steps.append(None)
                continue
            s = session(step.conn)
            reps = []
            res.steps.append(reps)
            if s.quit or s.broken:
                if trace:
                    trace(si, step, None)
                continue
            try:
                s.conn.send(step.wire())
            except (Timeout, Closed):
                pass  # the reads below see the closed connection
            for ci, cmd in enumerate(step.cmds):
                rref = ref.steps[si][ci] if ref and ci < len(ref.steps[si]) else None
                if ref and rref is None:
                    break  # the reference executed no more (QUIT before)
                rep = s.read_reply(cmd, len(rref.frames) if rref else None, timeout)
                reps.append(rep)
                if ref:
                    kind = classify(rref, rep)
                    if kind and fail(Diff(kind, si, ci, cmd, rref, rep)):
                        return res
                if rep.status != "ok":
                    s.broken = True
                    if not ref:
                        res.harness = (f"the reference gave no complete reply to step {si}"
                                       f" ({cmd.show()[:80]}): {rep.status}")
                        return res
                    break
                quitting = rref.quit if rref else rep.quit
                if quitting:
                    # the server closes the connection after +OK; later commands never run
                    extra = []
                    try:
                        while True:
                            extra.append(s.reply_frame(timeout))
                    except Closed:
                        eof = True
                    except Timeout:
                        eof = False
                    s.quit = True
                    res.eofs[(si, ci)] = eof
                    if ref and (extra or not eof):
                        what = ("replies after QUIT: " + " | ".join(fmt(f) for f, _ in extra)
                                if extra else "connection not closed after QUIT")
                        if fail(Diff("not closed after QUIT" if not extra else "replies after QUIT",
                                     si, ci, cmd, rref, rep, detail=what)):
                            return res
                    elif not ref and (extra or not eof):
                        res.harness = f"reference: QUIT at step {si} did not close cleanly"
                    break
            if trace:
                trace(si, step, reps)
        # Settle: collect late messages, and notice replies nobody asked for.
        live = [s for s in all_sessions if not s.quit and not s.broken and not s.conn.closed]
        want = {}
        if ref:
            for s in all_sessions:
                want[s.name] = len(ref.messages.get(s.name, []))
        quiet = 0.25 if script.publishes() else 0.03
        deadline = time.monotonic() + 3.0
        last = time.monotonic()
        while live and time.monotonic() < deadline:
            need = any(len(s.messages) < want.get(s.name, 0) for s in live)
            if not need and time.monotonic() - last > (quiet if ref else 0.05):
                break
            open_ = [s for s in live if not s.conn.eof]
            if not open_:
                break
            r, _, _ = select.select([s.conn.sock for s in open_], [], [], 0.02)
            for s in live:
                if s.conn.sock in r:
                    before = len(s.conn.buf)
                    s.conn._recv()
                    if len(s.conn.buf) != before:
                        last = time.monotonic()
                while True:
                    try:
                        f, _ = parse(s.conn.buf, s.conn.pos)
                    except Incomplete:
                        break
                    f, _ = s.conn.frame(0)
                    msg = as_message(f)
                    if msg:
                        s.messages.append(msg)
                    else:
                        res.extras.append((s.name, f, s.last_cmd))
        for s in all_sessions:
            res.messages[s.name] = s.messages
        closed = [s for s in live if s.conn.eof and s.conn.pos >= len(s.conn.buf)]
        if closed and not ref:
            res.harness = f"reference closed {closed[0].name} unexpectedly"
        if closed and ref and res.diff is None:
            fail(Diff("connection closed after the last reply", cmd=closed[0].last_cmd
                      or Cmd(["?"]), detail=f"{closed[0].name} was closed by the server"))
            return res
        if res.extras and not ref:
            res.harness = "reference sent unexpected frames: " + "; ".join(
                f"{n}: {fmt(f)}" for n, f, _ in res.extras)
        if ref and res.diff is None:
            if res.extras:
                n, f, last_cmd = res.extras[0]
                fail(Diff("extra reply", cmd=last_cmd or Cmd(["?"]),
                          detail=f"{n} got unrequested frame(s): " + " | ".join(
                              fmt(x) for _, x, _ in res.extras[:5])))
                return res
            names = sorted(set(ref.messages) | set(res.messages))
            for n in names:
                a = group_messages(ref.messages.get(n, []))
                b = group_messages(res.messages.get(n, []))
                if a != b:
                    d = Diff(message_diff_kind(a, b), detail=f"{n}: " + message_detail(a, b))
                    every = lambda g: collections.Counter(  # noqa: E731
                        (k[0], x) for k, v in g.items() for x in v)
                    d.missing_kinds = {kind for kind, _ in every(a) - every(b)}
                    fail(d)
                    break
        return res
    finally:
        for s in all_sessions:
            s.conn.close()


def message_diff_kind(a, b):
    na, nb = sum(map(len, a.values())), sum(map(len, b.values()))
    if na > nb:
        return "messages missing"
    if na < nb:
        return "extra messages"
    if sorted(x for v in a.values() for x in v) == sorted(x for v in b.values() for x in v):
        return "messages reordered"
    return "messages differ"


def message_detail(a, b):
    out = []
    for k in list(a) + [k for k in b if k not in a]:
        if a.get(k) != b.get(k):
            kind, pat, ch, pub = k
            what = f"{kind} {'pattern ' + pat.decode() + ' ' if pat else ''}{ch.decode()}" \
                   f" from {pub.decode()}"
            out.append(f"{what}: reference {[x.decode('latin-1') for x in a.get(k, [])]}"
                       f" vs proxy {[x.decode('latin-1') for x in b.get(k, [])]}")
    return "; ".join(out)[:1500]


# =======================================================================================
# Comparing, shrinking, reporting


class Checker:
    def __init__(self, env, args):
        self.env, self.args = env, args

    def check(self, script, timeout=None, trace=None, stop_on_diff=True):
        timeout = timeout or self.args.reply_timeout
        ref = run(self.env.ref, script, timeout=timeout)
        if ref.harness:
            return ref, None
        prx = run(self.env.proxy, script, ref=ref, timeout=timeout, trace=trace,
                  stop_on_diff=stop_on_diff)
        return ref, prx

    def shrink(self, script, sig, budget_s):
        """Delta debugging over steps, then over commands; a candidate is kept if it still
        shows a discrepancy with the same signature."""
        deadline = time.monotonic() + budget_s
        trials = [0]

        def bad(cand):
            if time.monotonic() > deadline:
                return False
            trials[0] += 1
            WATCHDOG.progress()
            ref, prx = self.check(cand, timeout=self.args.shrink_timeout)
            return prx is not None and prx.diff is not None and prx.diff.signature == sig

        def build(units):
            keep = {}
            for si, ci in units:
                if ci is None:
                    keep[si] = None
                else:
                    keep.setdefault(si, set()).add(ci)
            return script.subset(keep)

        units = [(s.oidx, None) for s in script.steps]
        units = ddmin(units, lambda u: bad(build(u)))
        cur = build(units)
        units = []
        for s in cur.steps:
            units += [(s.oidx, None)] if s.reconnect else [(s.oidx, c.oidx) for c in s.cmds]
        units = ddmin(units, lambda u: bad(build(u)))
        return build(units), trials[0], time.monotonic() > deadline


def ddmin(items, bad):
    n = 2
    while len(items) >= 2:
        chunk = -(-len(items) // n)
        reduced = False
        for i in range(0, len(items), chunk):
            cand = items[:i] + items[i + chunk:]
            if cand and bad(cand):
                items, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    return items


def show_diff(d, script, indent="  "):
    lines = []
    if d.step is None:
        lines.append(f"{indent}{d.signature}: {d.detail}")
        return lines
    if d.cmd is not None and d.ref is None:
        lines.append(f"{indent}{d.signature} after the last step: {d.detail}")
        return lines
    step = script.steps[d.step]
    lines.append(f"{indent}first differing step {d.step} (c{step.conn}), command {d.ci}:"
                 f" {d.cmd.show()[:200]}")
    lines.append(f"{indent}  reference: {d.ref.show()}")
    lines.append(f"{indent}  proxy:     {d.prx.show()}")
    if d.detail:
        lines.append(f"{indent}  {d.detail}")
    return lines


def show_script(script, ref=None, prx=None, indent="  "):
    lines = []
    for si, step in enumerate(script.steps):
        lines.append(f"{indent}{si:>2}  {step.show()[:600]}")
        if step.reconnect:
            continue
        r = ref.steps[si] if ref and si < len(ref.steps) else None
        p = prx.steps[si] if prx and si < len(prx.steps) else None
        if r is None and p is None:
            continue
        n = max(len(r or []), len(p or []))
        for ci in range(n):
            a = r[ci].show() if r and ci < len(r) else "(not read)"
            b = p[ci].show() if p and ci < len(p) else "(not read)"
            cmd = r[ci].cmd if r and ci < len(r) else p[ci].cmd
            same = p is None or (r is not None and ci < len(r) and ci < len(p)
                                 and classify(r[ci], p[ci]) is None)
            mark = "  " if same else "≠ "
            lines.append(f"{indent}    {mark}{cmd.show()[:60]:<40} ref: {a[:300]}")
            if not same and p is not None:
                lines.append(f"{indent}      {'':<40} prx: {b[:300]}")
    return lines


# =======================================================================================
# Chaos: live slot migration and graceful failovers


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384


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


# =======================================================================================
# Environment


def split_addr(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


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
    def __init__(self, cluster_config=()):
        # `NAME=VALUE` directives for every cluster node (`cluster up --config`).
        self.cluster_config = list(cluster_config)
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
        with open(self.proxy_log, "w") as logf:
            self.proxyproc = subprocess.Popen(
                [BIN, "proxy", "--listen", f"127.0.0.1:{pport}", "--seed", self.seed,
                 "--threads", "2"],
                stdout=logf, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG=os.environ.get("DIFFTEST_PROXY_LOG", "warn")))
        wait_ping(raddr, self.refproc, "reference redis-server")
        wait_ping(("127.0.0.1", pport), self.proxyproc, "proxy")
        self.ref = Target("reference", raddr)
        self.proxy = Target("proxy", ("127.0.0.1", pport), retry_s=30)
        self.failover_every = chaos_failover_every

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
        for p in (self.proxyproc, self.refproc):
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


class Watchdog(threading.Thread):
    """Aborts (with teardown) if no script or shrink trial finishes for STALL_S seconds."""

    def __init__(self):
        super().__init__(daemon=True)
        self.last = time.monotonic()
        self.env = None

    def progress(self):
        self.last = time.monotonic()

    def run(self):
        while True:
            time.sleep(5)
            if time.monotonic() - self.last > STALL_S:
                log(f"difftest: watchdog: no progress for {STALL_S} s, aborting")
                traceback.print_stack(sys._current_frames()[threading.main_thread().ident])
                if self.env:
                    self.env.stop()
                log("difftest: 0 passed, 1 failed")
                os._exit(3)


WATCHDOG = Watchdog()


# =======================================================================================
# Main


def rerun_line(args, seed, index, keep=None, chaos=False):
    parts = ["python3 scripts/difftest.py", f"--repro {seed}:{index}"]
    if keep:
        parts.append(f"--keep {keep}")
    if args.families_given:
        parts.append(f"--families {','.join(args.fams)}")
    if args.resp3_share != 0.3:
        parts.append(f"--resp3-share {args.resp3_share}")
    if RELAXED:
        parts.append(f"--relax {','.join(sorted(RELAXED))}")
    if chaos:
        parts.append("--chaos")
    return " ".join(parts)


def resolve_families(args):
    fams = list(FAMILIES)
    given = False
    if args.families:
        fams = [f.strip() for f in args.families.split(",") if f.strip()]
        given = True
    if args.skip_families:
        skip = {f.strip() for f in args.skip_families.split(",") if f.strip()}
        bad = skip - set(FAMILIES)
        if bad:
            sys.exit(f"difftest: unknown families {sorted(bad)}; see --list-families")
        fams = [f for f in fams if f not in skip]
        given = True
    bad = set(fams) - set(FAMILIES)
    if bad:
        sys.exit(f"difftest: unknown families {sorted(bad)}; see --list-families")
    if not fams:
        sys.exit("difftest: no family left")
    args.fams = [f for f in FAMILIES if f in fams]
    args.families_given = given


def run_jobs(args):
    """Runs `args.jobs` copies of this script, each with its own cluster and seed (base+i);
    their lines are passed through prefixed, and their final counts summed."""
    base = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1 << 30)
    argv, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("--jobs", "--seed", "--scripts"):
            skip = True
            continue
        if a.startswith(("--jobs=", "--seed=", "--scripts=")):
            continue
        argv.append(a)
    procs = []
    for i in range(args.jobs):
        extra = ["--seed", str(base + i)]
        if args.scripts is not None:
            extra += ["--scripts", str(args.scripts // args.jobs + (i < args.scripts % args.jobs))]
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv + extra,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, bufsize=1))
    totals = [0, 0, 0, 0]
    lock = threading.Lock()

    def pump(i, proc):
        for line in proc.stdout:
            m = re.match(r"difftest: (\d+) passed, (\d+) failed", line)
            w = re.match(r"difftest: (\d+) lost their WATCH", line)
            sh = re.match(r"difftest: (\d+) met a shard resubscription", line)
            with lock:
                if sh:
                    totals[3] += int(sh.group(1))
                if m:
                    totals[0] += int(m.group(1))
                    totals[1] += int(m.group(2))
                if w:
                    totals[2] += int(w.group(1))
                sys.stdout.write(f"[job {i}] {line}")
                sys.stdout.flush()

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    threads = [threading.Thread(target=pump, args=(i, p)) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    try:
        codes = [p.wait() for p in procs]
    except SystemExit:
        for p in procs:  # each copy tears its own cluster down on SIGTERM
            p.terminate()
        for p in procs:
            p.wait()
        raise
    for t in threads:
        t.join()
    log(f"difftest: {args.jobs} jobs, seeds {base}..{base + args.jobs - 1}")
    if totals[2]:
        log(f"difftest: {totals[2]} lost their WATCH to chaos (EXEC nil by design, counted apart)")
    if totals[3]:
        log(f"difftest: {totals[3]} met a shard resubscription after a slot move (counted apart)")
    log(f"difftest: {totals[0]} passed, {totals[1]} failed")
    return 0 if totals[1] == 0 and not any(codes) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, help="run seed (default: random; always printed)")
    ap.add_argument("--scripts", type=int, help="number of scripts (default 100, or unlimited"
                    " with --seconds)")
    ap.add_argument("--seconds", type=float, help="time budget: start no new script after it")
    ap.add_argument("--chaos", action="store_true", help="move slots and fail over masters"
                    " while scripts run")
    ap.add_argument("--chaos-seconds", type=float, default=0,
                    help="after the plain budget, this many more seconds with --chaos")
    ap.add_argument("--faults", action="store_true", help="hard faults on real nodes while"
                    " scripts run: kill -9 + restart, SIGSTOP/CONT, CLIENT KILL, failover"
                    " (scripts/faultinject.py); scripts overlapping a fault may differ")
    ap.add_argument("--fault-every", type=float, default=8,
                    help="faults: mean seconds between two faults")
    ap.add_argument("--failover-every", type=float, default=15,
                    help="chaos: seconds between graceful failovers (0: none)")
    ap.add_argument("--families", help="comma-separated families to enable (default all)")
    ap.add_argument("--skip-families", help="comma-separated families to disable")
    ap.add_argument("--list-families", action="store_true")
    ap.add_argument("--resp3-share", type=float, default=0.3,
                    help="share of connections that start with HELLO 3 (default 0.3)")
    ap.add_argument("--relax", default="", help="comma-separated opt-in relaxations:"
                    f" {', '.join(sorted(RELAXATIONS))} (see RELAXATIONS in the source)")
    ap.add_argument("--repro", metavar="SEED:INDEX", help="rerun one script verbosely")
    ap.add_argument("--keep", help="with --repro: only these steps/commands (as printed)")
    ap.add_argument("--reply-timeout", type=float, default=5.0)
    ap.add_argument("--shrink-timeout", type=float, default=1.5,
                    help="reply timeout while shrinking (a hang shrinks faster)")
    ap.add_argument("--shrink-seconds", type=float, default=60,
                    help="time limit for shrinking one discrepancy")
    ap.add_argument("--shrink-budget", type=float, default=300,
                    help="total time for shrinking in the run")
    ap.add_argument("--shrink-per-class", type=int, default=1,
                    help="discrepancies shrunk per class (the others are only counted)")
    ap.add_argument("--quiet", action="store_true", help="one line per failed script")
    ap.add_argument("--cluster-config", action="append", default=[], metavar="NAME=VALUE",
                    help="a config directive for every cluster node (repeatable), e.g. "
                         "cluster-preferred-endpoint-type=hostname")
    ap.add_argument("--jobs", type=int, default=1,
                    help="run this many independent copies (own cluster, seed+i) at once and"
                    " sum their counts: a run mostly waits on replies, so copies overlap")
    args = ap.parse_args()
    if args.jobs > 1 and not args.repro:
        return run_jobs(args)
    if args.list_families:
        for k, v in FAMILIES.items():
            print(f"{k:<10} {v}")
        return 0
    resolve_families(args)
    RELAXED.update(x.strip() for x in args.relax.split(",") if x.strip())
    if RELAXED - RELAXATIONS:
        sys.exit(f"difftest: unknown --relax {sorted(RELAXED - RELAXATIONS)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1 << 31)

    env = Env(args.cluster_config)
    atexit.register(env.stop)

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    WATCHDOG.env = env
    WATCHDOG.start()
    t0 = time.monotonic()
    try:
        env.start(args.failover_every)
    except Exception as e:  # noqa: BLE001
        log(f"difftest: setup failed: {type(e).__name__}: {e}")
        log("difftest: 0 passed, 1 failed")
        return 1
    checker = Checker(env, args)
    log(f"difftest: seed {seed}; families {','.join(args.fams)}; reference"
        f" {env.ref.addr[1]}, proxy {env.proxy.addr[1]}, cluster {' '.join(env.masters)}"
        f" (setup {time.monotonic() - t0:.1f}s); binary {BIN} built"
        f" {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(os.path.getmtime(BIN)))}")

    if args.repro:
        return repro(args, env, checker)

    passed = failed = disturbed = watch_lost = shard_lost = 0
    stats_before = None
    if args.faults:
        env.faults = faultinject.Faults(env.nodes, args.fault_every, seed, log)
    classes = collections.OrderedDict()  # signature -> dict(count, first, shrunk lines)
    shrink_left = args.shrink_budget
    phases = []
    if args.chaos:
        phases.append(("chaos", args.seconds))
    else:
        phases.append(("plain", args.seconds))
        if args.chaos_seconds:
            phases.append(("chaos", args.chaos_seconds))
    limit = args.scripts if args.scripts is not None else (None if args.seconds else 100)
    index = 0
    run_start = time.monotonic()
    for phase, seconds in phases:
        chaos = phase == "chaos"
        if chaos:
            env.start_chaos(seed)
            log(f"difftest: chaos on (slot moves over {len(env.chaos.slots)} slots, failover"
                f" every {args.failover_every:g}s)")
        p_start = time.monotonic()
        p_count = 0
        next_progress = time.monotonic() + 30
        while True:
            if seconds is not None and time.monotonic() - p_start >= seconds:
                break
            if limit is not None and p_count >= limit:
                break
            script = generate(seed, index, set(args.fams), args.resp3_share)
            err = None
            t_script = time.monotonic()
            try:
                ref, prx = checker.check(script)
                if ref.harness:
                    err = "harness: " + ref.harness
            except Exception as e:  # noqa: BLE001
                err = f"error: {type(e).__name__}: {e}"
                if os.environ.get("DIFFTEST_DEBUG"):
                    traceback.print_exc()
            WATCHDOG.progress()
            faulted = (err is not None or prx.diff is not None) and env.faults is not None \
                and env.faults.overlaps(t_script, time.monotonic())
            if faulted:
                # A fault hit this script: an unknown outcome or Redis's own loss of an
                # unreplicated write may make it differ. Counted, not failed.
                disturbed += 1
                what = err if err is not None else prx.diff.signature
                log(f"disturbed script {index} (overlapped a fault): {what[:120]}")
            elif err is None and prx.diff is not None and watch_lost_to_chaos(
                    prx.diff, script, env.chaos):
                watch_lost += 1
                log(f"script {index}: EXEC nil, its WATCH lost to a slot move or failover"
                    " (by design, not failed)")
            elif err is None and prx.diff is not None and shard_count_lost_to_chaos(
                    prx.diff, script, t_script, env.chaos):
                shard_lost += 1
                log(f"script {index}: {prx.diff.signature} while its shard channel's slot"
                    " moved (the resubscription window, counted apart)")
            elif err is not None:
                failed += 1
                sig = "HARNESS/ERROR: " + re.sub(r"\d+", "N", err)[:70]
                c = classes.setdefault(sig, dict(count=0, first=(index, chaos), lines=[]))
                c["count"] += 1
                log(f"FAIL script {index} (seed {seed}{', chaos' if chaos else ''}): {err}")
            elif prx.diff is None:
                passed += 1
            else:
                failed += 1
                d = prx.diff
                sig = d.signature
                c = classes.setdefault(sig, dict(count=0, first=(index, chaos), lines=[],
                                                 shrunk=0))
                c["count"] += 1
                log(f"FAIL script {index} (seed {seed}{', chaos' if chaos else ''}): {sig}")
                if not args.quiet or c["count"] == 1:
                    for line in show_diff(d, script):
                        log(line)
                if c.get("shrunk", 0) < args.shrink_per_class and shrink_left > 0:
                    c["shrunk"] = c.get("shrunk", 0) + 1
                    ts = time.monotonic()
                    lines = report_shrunk(args, checker, script, sig, chaos,
                                          min(args.shrink_seconds, shrink_left))
                    shrink_left -= time.monotonic() - ts
                    c["lines"] = lines
                    for line in lines:
                        log(line)
                else:
                    log("  " + rerun_line(args, seed, index, chaos=chaos))
            if env.faults is not None and stats_before is None:
                # Measured once warm (first script done, pools open), before any fault.
                stats_before = faultinject.proc_stats(env.proxyproc.pid)
                log("difftest: proxy connections by peer port:",
                    faultinject.peers(env.proxyproc.pid))
                env.faults.start()
            if not env.proxy_alive():
                log(f"difftest: the proxy exited ({env.proxyproc.returncode}); log tail:\n"
                    + env.log_tail())
                failed += 1
                classes.setdefault("PROXY EXITED", dict(count=1, first=(index, chaos), lines=[]))
                break
            index += 1
            p_count += 1
            if time.monotonic() > next_progress:
                next_progress = time.monotonic() + 30
                extra = ""
                if env.faults is not None and env.proxy_alive():
                    fds, rss = faultinject.proc_stats(env.proxyproc.pid)
                    extra = f"; proxy fds {fds}, RSS {rss // 1024} MB"
                log(f"progress: {index} scripts, {passed} passed, {failed} failed,"
                    f" {time.monotonic() - run_start:.0f}s{extra}")
        if chaos:
            ch = env.stop_chaos()
            log(f"difftest: chaos: {ch.moves} slot moves ({ch.atomic_moves} atomic,"
                f" {ch.atomic or 'none'}), {ch.failovers} failovers,"
                f" {ch.errors} errors" + (f" (last: {ch.last_error})" if ch.errors else ""))
        if not env.proxy_alive():
            break
    log(f"difftest: {index} scripts in {time.monotonic() - run_start:.1f}s (seed {seed})")
    if env.faults is not None:
        failed += report_faults(env, stats_before, disturbed)
    if classes:
        log("discrepancy classes (count, signature, first script):")
        for sig, c in sorted(classes.items(), key=lambda kv: -kv[1]["count"]):
            i, ch = c["first"]
            log(f"  {c['count']:>4}  {sig}  [{seed}:{i}{' chaos' if ch else ''}]")
        kinds = collections.Counter()
        for sig, c in classes.items():
            kinds[sig.split(": ", 1)[-1]] += c["count"]
        log("by kind of difference (any command): " + ", ".join(
            f"{k} {n}" for k, n in kinds.most_common()))
    if watch_lost:
        log(f"difftest: {watch_lost} lost their WATCH to chaos (EXEC nil by design, counted apart)")
    if shard_lost:
        log(f"difftest: {shard_lost} met a shard resubscription after a slot move (counted apart)")
    log(f"difftest: {passed} passed, {failed} failed")
    return 1 if failed else 0


def report_faults(env, before, disturbed):
    """Stops the faults, waits for the cluster to settle and reports; failures found."""
    f = env.faults
    f.stop()
    bad = 0
    try:
        f.converge()
    except Exception as e:  # noqa: BLE001
        f.errors.append(f"final converge: {e}")
    out = subprocess.run(["redis-cli", "--cluster", "check", env.seed], capture_output=True,
                         text=True)
    if out.returncode != 0 or "[OK] All 16384 slots covered" not in out.stdout:
        f.errors.append("redis-cli --cluster check failed:\n" + out.stdout[-2000:])
    # The proxy notices the settled topology on its own; give it one refresh period.
    time.sleep(2)
    after = faultinject.proc_stats(env.proxyproc.pid) if env.proxy_alive() else (-1, -1)
    log(f"difftest: proxy connections by peer port: {faultinject.peers(env.proxyproc.pid)}")
    counts = ", ".join(f"{n} {k}" for k, n in f.counts.items())
    log(f"difftest: faults: {counts}; {disturbed} scripts overlapped a fault (not compared)")
    before = before or (-1, -1)
    log(f"difftest: proxy fds {before[0]} -> {after[0]}, RSS {before[1] // 1024} ->"
        f" {after[1] // 1024} MB")
    for e in f.errors:
        log(f"difftest: fault harness: {e}")
        bad += 1
    # Pools to nodes that changed role may stay open: a bound, not equality.
    if before[0] >= 0 and after[0] > before[0] + 32:
        log("difftest: the proxy's file descriptors grew")
        bad += 1
    return bad


def report_shrink_lines(args, script, small, ref, prx, chaos, trials, timed_out):
    lines = [f"  minimal reproduction ({len(small.steps)} of {len(script.steps)} steps,"
             f" {small.ncmds()} of {script.ncmds()} commands, {trials} trials"
             f"{', shrink time limit hit' if timed_out else ''}):"]
    lines += show_script(small, ref, prx, indent="    ")
    if prx is not None and prx.diff is not None:
        lines += show_diff(prx.diff, small, indent="    ")
    lines.append("    rerun: " + rerun_line(args, script.seed, script.index,
                                            small.keep_spec(script), chaos))
    return lines


def report_shrunk(args, checker, script, sig, chaos, budget):
    small, trials, timed_out = checker.shrink(script, sig, budget)
    ref, prx = checker.check(small, timeout=args.shrink_timeout, stop_on_diff=False)
    lines = report_shrink_lines(args, script, small, ref, prx, chaos, trials, timed_out)
    if small.ncmds() == script.ncmds():
        lines.insert(1, "    (no reduction: no smaller script showed the same discrepancy)")
    if prx is None or prx.diff is None or prx.diff.signature != sig:
        lines.append("    note: this script did not show the discrepancy on its final rerun"
                     " (timing-dependent)")
    return lines


def repro(args, env, checker):
    try:
        seed, index = (int(x) for x in args.repro.split(":"))
    except ValueError:
        sys.exit("difftest: --repro wants SEED:INDEX")
    script = generate(seed, index, set(args.fams), args.resp3_share)
    if args.keep:
        script = script.subset(parse_keep(args.keep))
    if args.chaos:
        env.start_chaos(seed)
        time.sleep(1)
    ref, prx = checker.check(script, stop_on_diff=False)
    if args.chaos:
        env.stop_chaos()
    log(f"script {seed}:{index}: {len(script.steps)} steps, {script.ncmds()} commands")
    for line in show_script(script, ref, prx):
        log(line)
    for name in sorted(set(ref.messages) | set(prx.messages if prx else {})):
        log(f"  messages {name}: reference {len(ref.messages.get(name, []))},"
            f" proxy {len((prx.messages if prx else {}).get(name, []))}")
    if ref.harness:
        log("  harness: " + ref.harness)
        log("difftest: 0 passed, 1 failed")
        return 1
    ok = prx.diff is None
    if not ok:
        log(f"  DIFF {prx.diff.signature}")
        for line in show_diff(prx.diff, script):
            log(line)
    log(f"difftest: {1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        print("difftest: 0 passed, 1 failed", flush=True)
        sys.exit(1)

"""What the differential test counts as the same reply, and how it names a difference.

Replies are frames (slotgate_tools.resp) compared byte for byte, except for the few
normalisations here (NORMALISE, TOLERANCE, UNSUBSCRIBE_ALL): the ONLY places where the proxy
may legitimately differ from one Redis (docs/difftest.md). Also: the frames' compact display,
pub/sub messages told apart from replies, a discrepancy (Diff) and its class (classify), and
the differences chaos may cause by design, counted apart (watch_lost_to_chaos,
shard_count_lost_to_chaos)."""

import math
import time

from slotgate_tools.resp import encode_frame

from .script import key_slot, show_bytes


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
        return (t, sorted(v, key=encode_frame))
    return f


def norm_sorted_pairs(f):
    # HGETALL: field/value pairs in hash-table order; compare the set of pairs.
    t, v = f
    if t in "*%" and v is not None and len(v) % 2 == 0:
        return (t, [x for p in sorted(_pairs(v),
                                      key=lambda p: encode_frame(p[0]) + encode_frame(p[1]))
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
# PTTL by 1.5 s, plus how much the lag between the two runs changed since the TTL could
# have been set (`run.py`: an idle standalone reference wakes for a blocked command's 10 ms
# timeout only at its next cron tick, 100 ms later, so a script of many short blocking
# timeouts runs seconds slower there than through busy cluster nodes). Only the change
# counts: a steady lag moves the set and the read alike, and an EXPIRE run again later
# through the proxy still shows. Negative answers (-1 no expiry, -2 no key) must be equal.
TOLERANCE = {"TTL": 1, "PTTL": 1500}
TOLERANCE_UNIT = {"TTL": 1.0, "PTTL": 0.001}
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
                sorted(encode_frame(f[1][1]) for f in out))
    ca = canon(a)
    return ca is not None and ca == canon(b)


def equal_frames(key, ctx, a, b, drift=0.0):
    """a, b: parsed frames of one reply of command `key` (ctx: queued commands for EXEC;
    drift: seconds the two runs may have drifted apart in time, see TOLERANCE)."""
    if key == "EXEC" and ctx and a[0] == b[0] == "*" and a[1] is not None and b[1] is not None:
        return len(a[1]) == len(b[1]) and all(
            equal_frames(c.key, None, x, y, drift)
            for c, x, y in zip(ctx, a[1], b[1], strict=False))
    if key == "PUBLISH" and "publish-count" in RELAXED and a[0] == b[0] == ":":
        return True
    if key in TOLERANCE and a[0] == b[0] == ":":
        x, y = int(a[1]), int(b[1])
        slack = TOLERANCE[key] + math.ceil(drift / TOLERANCE_UNIT[key])
        return x == y or (x >= 0 and y >= 0 and abs(x - y) <= slack)
    if key in NORMALISE:
        return encode_frame(NORMALISE[key](a)) == encode_frame(NORMALISE[key](b))
    return encode_frame(a) == encode_frame(b)


# =======================================================================================
# Discrepancies


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


def classify(ref, prx, drift=0.0):
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
        if equal_frames(ref.cmd.key, ref.ctx, a, b, drift):
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


def group_messages(msgs):
    # a plain dict: equality ignores the interleaving of different (publisher, channel) groups
    # (OrderedDict's would not); only the order within one group must match
    g = {}
    for kind, pat, ch, payload in msgs:
        pub = payload.split(b":", 1)[0]
        g.setdefault((kind, pat, ch, pub), []).append(payload)
    return g


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

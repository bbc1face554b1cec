"""Running a script against the reference and then the proxy (Target, run), comparing as it
goes, and the check of one script on both (Checker): the reply streams per connection, the
pub/sub messages at the end, replies nobody asked for, connections closed."""

import collections
import select
import time

from slotgate_tools.resp import Incomplete, ProtocolError, parse

from .chaos import FLUSH_GUARD
from .common import log
from .compare import (Diff, _pairs, as_message, classify, fmt, group_messages, message_detail,
                      message_diff_kind)
from .conn import Closed, Conn, Session, Timeout
from .gen import CHANNELS, SHARD_GROUPS
from .script import Cmd


class RunResult:
    def __init__(self):
        self.steps = []  # per step: list of Reply (None for a reconnect step)
        self.messages = {}  # session name -> [messages]
        self.extras = []  # (session name, frame) replies nobody asked for
        self.diff = None
        self.harness = None
        self.eofs = {}  # (step, ci) -> True if the connection closed after QUIT


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
    started = time.monotonic()
    # How far the proxy's run was behind the reference's (signed, seconds) at the earlier
    # replies, lowest and highest: a TTL set at one of them and read now differs between
    # the runs by the change of that lag since (compare.TOLERANCE), so the slack is the
    # largest change from any of them (0: both runs start together).
    lag_lo = lag_hi = 0.0
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
                rep.at = time.monotonic() - started
                reps.append(rep)
                if ref:
                    lag = rep.at - rref.at
                    kind = classify(rref, rep, max(abs(lag - lag_lo), abs(lag - lag_hi)))
                    lag_lo, lag_hi = min(lag_lo, lag), max(lag_hi, lag)
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


class Checker:
    """One script on the reference, then on the proxy compared with it (shrink.py reruns
    smaller scripts through it)."""

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

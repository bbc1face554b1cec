"""The differential test's data model of a script: commands (Cmd), the pipelined writes of
one connection (Step) and whole scripts (Script), with the selection by `--keep` that
reproductions and shrinking use, and the cluster slot of a key (key_slot)."""

import re

from slotgate_tools.resp import CRLF, encode

SUBCOMMANDS = {"CLIENT", "CLUSTER", "SCRIPT", "PUBSUB", "OBJECT", "CONFIG", "FUNCTION"}
# Commands Redis runs at once inside MULTI (not queued).
MULTI_PASS = {"EXEC", "DISCARD", "MULTI", "WATCH", "QUIT", "RESET"}


def show_bytes(b, limit=60):
    """An argument or bulk string for a person: quoted, or its size when long."""
    if len(b) > limit:
        return f"<{len(b)} bytes {b[:24]!r}…>"
    s = repr(b)[2:-1]
    return '"' + s.replace('"', '\\"') + '"'


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
        return encode(*self.args)

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


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    """The cluster slot of a key (its hash tag's, if it has one)."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384

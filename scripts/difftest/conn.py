"""The differential test's client connections: a non-blocking socket with its read buffer
(Conn, which never blocks a pipelined write on a full buffer), the replies of one command
(Reply) and one session's state as read from the replies (Session: subscriptions, MULTI,
QUIT), which tells how many frames a command answers and separates pub/sub messages."""

import select
import socket

from slotgate_tools.resp import Incomplete, encode, parse

from .compare import CONFIRM, as_message, fmt, head
from .script import MULTI_PASS


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
        self.send(encode(*args))
        return self.frame()[0]


class Reply:
    # at: seconds from the start of its run to when its reply was read (the runs' drift)
    __slots__ = ("cmd", "frames", "status", "ctx", "quit", "at")

    def __init__(self, cmd):
        self.cmd, self.frames, self.status, self.ctx, self.quit = cmd, [], "ok", None, False
        self.at = 0.0

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

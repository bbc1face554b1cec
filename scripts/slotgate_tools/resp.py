"""The one RESP2/RESP3 codec of the repository's scripts, so none writes its own.

Why: the scripts used to carry five hand-written codecs (difftest, gen_command_table,
faultinject, bench_core, and what imported gen_command_table's), each covering a different
subset of the protocol with its own return types. Here is one of each piece:

- `encode(*args)`: a command as a RESP array of bulk strings (str, bytes, int, ...).
- Frames, the byte-exact model the differential test compares: `(type, value)` where `type`
  is the reply's first byte as a str; simple types (`+ - : , # (`) carry their line (bytes),
  bulk types (`$ ! =`) bytes or None, aggregates (`* ~ > %`) a list of frames (maps
  flattened: k1, v1, k2, v2...) or None, `_` None, and an attribute `|` the pair
  (flattened attribute frames, the frame it annotates). `encode_frame` writes one back
  byte for byte.
  - `parse(buf, pos)`: one frame from an in-memory buffer (raises `Incomplete`).
  - `read_frame(f)`: one frame from a buffered binary file (`sock.makefile("rb")`).
- Values, what the other scripts want: `value(frame)` / `read(f)`: `+`, `$`, `=` (without
  its `txt:` format) as bytes, or str with `text=True`; `:` and `(` int, `,` float, `#`
  bool, `_` and nil None, `* ~ >` lists, `%` dicts, `|` the value it annotates; an error
  (`-`, `!`) is returned as a `RespError` instance, so callers can tell it from a string.
- `Conn`: a blocking connection (`call` raises a `RespError`, `read` returns it).

A connection that ends mid-reply raises `Closed` (an OSError); a byte that starts no RESP
type raises `ProtocolError` (an OSError too). Python 3 standard library only.
"""

import socket

CRLF = b"\r\n"
SIMPLE = "+-:,#("  # the line is the value
BULK = "$!="  # a length line, then that many bytes
AGGREGATE = "*~>%|"  # a count line, then that many frames (pairs for % and |)


class RespError(RuntimeError):
    """An error reply (`-`, or RESP3's blob error `!`); str() is its text without the `-`.
    `read`/`value` return it (it may sit inside an array, as EXEC's errors do); `Conn.call`
    raises it. A RuntimeError, as the scripts' earlier codecs raised."""


class Closed(ConnectionError):
    """The connection ended before a whole reply."""


class ProtocolError(OSError):
    """Bytes that are not RESP."""


class Incomplete(Exception):
    """`parse` needs more bytes than the buffer holds."""


def encode(*args):
    """One command as a RESP array of bulk strings; str is UTF-8, other non-bytes str()'d."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, (bytearray, memoryview)):
            a = bytes(a)
        elif not isinstance(a, bytes):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


# ---------------------------------------------------------------------------- frames


def parse(buf, pos):
    """One frame from buf (bytes or bytearray) at pos -> (frame, end). Raises Incomplete if
    more bytes are needed, ProtocolError if buf holds no RESP there."""
    if pos >= len(buf):
        raise Incomplete
    nl = buf.find(CRLF, pos + 1)
    if nl < 0:
        raise Incomplete
    c = chr(buf[pos])
    line = bytes(buf[pos + 1:nl])
    try:
        if c in SIMPLE:
            return (c, line), nl + 2
        if c == "_":
            return ("_", None), nl + 2
        if c in BULK:
            n = int(line)
            if n < 0:
                return (c, None), nl + 2
            end = nl + 2 + n
            if len(buf) < end + 2:
                raise Incomplete
            return (c, bytes(buf[nl + 2:end])), end + 2
        if c in AGGREGATE:
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


def read_frame(f):
    """One frame from a buffered binary file object (what `parse` returns, read blocking)."""
    line = f.readline()
    if not line.endswith(CRLF):
        raise Closed("connection closed")
    c, body = chr(line[0]), line[1:-2]
    try:
        if c in SIMPLE:
            return (c, body)
        if c == "_":
            return ("_", None)
        if c in BULK:
            n = int(body)
            if n < 0:
                return (c, None)
            data = f.read(n + 2)
            if len(data) < n + 2:
                raise Closed("connection closed")
            return (c, data[:-2])
        if c in AGGREGATE:
            n = int(body)
            if n < 0:
                return (c, None)
            items = [read_frame(f) for _ in range(n * 2 if c in "%|" else n)]
            if c == "|":
                return ("|", (items, read_frame(f)))
            return (c, items)
    except ValueError:
        pass
    raise ProtocolError(f"bad frame start {line[:40]!r}")


def encode_frame(f):
    """A frame back to its bytes, exactly as `parse` read them."""
    t, v = f
    tb = t.encode()
    if t in SIMPLE:
        return tb + v + CRLF
    if t == "_":
        return b"_\r\n"
    if v is None:
        return tb + b"-1\r\n"
    if t in BULK:
        return tb + str(len(v)).encode() + CRLF + v + CRLF
    if t == "|":
        attrs, inner = v
        return b"|%d\r\n" % (len(attrs) // 2) + b"".join(map(encode_frame, attrs)) \
            + encode_frame(inner)
    n = len(v) // 2 if t == "%" else len(v)
    return tb + str(n).encode() + CRLF + b"".join(map(encode_frame, v))


# ---------------------------------------------------------------------------- values


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def value(frame, text=False, errors="strict"):
    """A frame as Python data (see the module's docstring); strings decoded as UTF-8 with
    `errors` when `text`."""
    t, v = frame
    if t in "-!":
        return RespError((v or b"").decode("utf-8", "replace"))
    if t in ":(":
        return int(v)
    if t == ",":
        return float(v)
    if t == "#":
        return v == b"t"
    if v is None:  # `_`, and nil bulks and aggregates
        return None
    if t in "+$=":
        if t == "=" and v[3:4] == b":":
            v = v[4:]  # the verbatim string's format (`txt:`, `mkd:`)
        return v.decode("utf-8", errors) if text else v
    if t in "*~>":
        return [value(x, text, errors) for x in v]
    if t == "%":
        items = [value(x, text, errors) for x in v]
        return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    if t == "|":
        return value(v[1], text, errors)
    raise ProtocolError(f"unknown frame type {t!r}")


def read(f, text=False, errors="strict"):
    """One reply from a buffered binary file object, as a value; an error reply is returned
    as a RespError, not raised."""
    return value(read_frame(f), text, errors)


def check(reply):
    """The reply, or its RespError raised."""
    if isinstance(reply, RespError):
        raise reply
    return reply


class Conn:
    """A blocking connection to 127.0.0.1:port (or host). Replies are str with `text`
    (decoded with `errors`), else bytes. `timeout` bounds the connect and every read."""

    def __init__(self, port, host="127.0.0.1", timeout=10.0, text=True, errors="strict"):
        self.text, self.errors = text, errors
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def send(self, *args):
        """Writes one command; its reply is left for `read`."""
        self.sock.sendall(encode(*args))

    def read(self):
        """The next reply; an error reply is returned as a RespError."""
        return read(self.file, self.text, self.errors)

    def call(self, *args):
        """One command and its reply; an error reply is raised as a RespError."""
        self.send(*args)
        return check(self.read())

    def pipeline(self, *commands):
        """Writes the commands (each a tuple of arguments) in one write, then reads their
        replies, errors among them as RespError values."""
        self.sock.sendall(b"".join(encode(*c) for c in commands))
        return [self.read() for _ in commands]

    def close(self):
        for closable in (self.file, self.sock):
            try:
                closable.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

#!/usr/bin/env python3
"""Generate crates/cluster/src/command/table.rs from a live redis-server.

Why: the proxy's routing must agree with the servers about arity, flags and
key positions of every command. Rather than hand-copying that knowledge, this
script asks a real server (COMMAND INFO for the facts, COMMAND DOCS for the
group/since comments) and emits one `CommandSpec` literal per command.

Usage (python3 stdlib only):
    scripts/gen_command_table.py                # starts redis-server itself
    scripts/gen_command_table.py --port 7000    # uses a running server
Options: --redis-server PATH (default $REDIS_SERVER or `redis-server`),
         --out FILE (default crates/cluster/src/command/table.rs).
The output is passed through rustfmt when it is on PATH.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from slotgate_tools.ports import free_port
from slotgate_tools.resp import Conn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "crates", "cluster", "src", "command", "table.rs")

# COMMAND INFO flag name -> constant in `flags`. An unknown name aborts the
# run, so a newer server cannot silently lose information.
FLAGS = {
    "write": "WRITE", "readonly": "READONLY", "denyoom": "DENYOOM",
    "admin": "ADMIN", "pubsub": "PUBSUB", "noscript": "NOSCRIPT",
    "blocking": "BLOCKING", "loading": "LOADING", "stale": "STALE",
    "skip_monitor": "SKIP_MONITOR", "skip_slowlog": "SKIP_SLOWLOG",
    "asking": "ASKING", "fast": "FAST", "no_auth": "NO_AUTH",
    "may_replicate": "MAY_REPLICATE", "no_mandatory_keys": "NO_MANDATORY_KEYS",
    "no_async_loading": "NO_ASYNC_LOADING", "no_multi": "NO_MULTI",
    "movablekeys": "MOVABLE_KEYS", "allow_busy": "ALLOW_BUSY",
}

ACL = {
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast",
    "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
}

REQUEST = {
    "all_nodes": "AllNodes", "all_shards": "AllShards",
    "multi_shard": "MultiShard", "special": "Special",
}
RESPONSE = {
    "one_succeeded": "OneSucceeded", "all_succeeded": "AllSucceeded",
    "agg_logical_and": "AggLogicalAnd", "agg_logical_or": "AggLogicalOr",
    "agg_min": "AggMin", "agg_max": "AggMax", "agg_sum": "AggSum",
    "special": "Special",
}

# Override: the key specs say where numkeys is, but not which error text each
# command answers for a bad numkeys; these families were checked against a
# 7.0.15 server by hand (see NumKeysErrors in command/mod.rs).
NUMKEYS_ERRORS = {
    **dict.fromkeys(["eval", "evalsha", "eval_ro", "evalsha_ro"], "Script"),
    **dict.fromkeys(["fcall", "fcall_ro"], "Function"),
    **dict.fromkeys(["zunion", "zinter", "zdiff", "zunionstore", "zinterstore",
                     "zdiffstore", "zintercard"], "SortedSetOp"),
    "sintercard": "SetCard",
    **dict.fromkeys(["lmpop", "zmpop", "blmpop", "bzmpop"], "MultiPop"),
}

# Overrides for commands whose server key specs are 'unknown' or
# 'incomplete', so they cannot be turned into positions mechanically.
OVERRIDES = {
    # SORT's STORE may appear anywhere after the key; LIMIT/GET/BY values
    # are skipped so that e.g. `GET store` is not read as the keyword.
    "sort": ("keyword", ["STORE"], 2, [("LIMIT", 2), ("GET", 1), ("BY", 1)], "EachNext"),
    # SORT_RO's BY/GET patterns name keys derived from data; they cannot be
    # routed and the server ignores them for routing too.
    "sort_ro": ("legacy",),
    # MIGRATE host port "" db timeout [COPY] [REPLACE] [AUTH pw]
    # [AUTH2 user pw] KEYS k...: the KEYS list replaces the (empty) key arg.
    "migrate": ("keyword", ["KEYS"], 6, [("AUTH", 1), ("AUTH2", 2)], "RestReplacingEmptyKey"),
}


# Key specs left out of `key_access`: SORT's and SORT_RO's second spec stands for the BY and
# GET patterns, whose keys derive from the data and are never key positions. Redis checks
# them apart (every key must be readable), and so does the proxy (session/auth.rs).
ACCESS_NOT_KEYS = {"sort": 1, "sort_ro": 1}


def as_map(v):
    """RESP2 sends maps as flat [k, v, k, v] arrays."""
    if isinstance(v, dict):
        return v
    return {v[i]: v[i + 1] for i in range(0, len(v), 2)}


# ---------------------------------------------------------- server control


def start_server(binary):
    tmp = tempfile.mkdtemp(prefix="gen_command_table.")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            conn = Conn(port)
            conn.call("PING")
            return proc, tmp, conn
        except (OSError, RuntimeError):
            time.sleep(0.05)
    proc.kill()
    sys.exit("redis-server did not start on port %d" % port)


# ------------------------------------------------------------ translation

def key_spec_parts(ks):
    ks = as_map(ks)
    begin, find = as_map(ks["begin_search"]), as_map(ks["find_keys"])
    return (ks["flags"], begin["type"], as_map(begin["spec"] or []),
            find["type"], as_map(find["spec"] or []))


def derive_keys(info):
    """KeySpec tuple for one COMMAND INFO entry (see OVERRIDES for shape)."""
    name, flags, first, specs = info[0], info[2], info[3], info[8]
    if name in OVERRIDES:
        return OVERRIDES[name]
    parts = [key_spec_parts(s) for s in specs]
    if "movablekeys" not in flags:
        for _, btype, _, ftype, _ in parts:
            assert btype == "index" and ftype == "range", name
        return ("legacy",) if first != 0 else ("none",)
    numkeys, keywords = [], []
    for _, btype, bspec, ftype, fspec in parts:
        if btype == "index" and ftype == "range":
            # Plain positional spec: must be what the legacy range covers.
            assert bspec["index"] == first and fspec["lastkey"] == 0, name
        elif btype == "index" and ftype == "keynum":
            at = bspec["index"]
            numkeys.append(("numkeys", at + fspec["keynumidx"], at + fspec["firstkey"],
                            fspec["keystep"], NUMKEYS_ERRORS[name]))
        elif btype == "keyword" and ftype == "range" and bspec["startfrom"] > 0:
            keywords.append((bspec["keyword"], bspec["startfrom"], fspec))
        else:
            sys.exit("no override for movable-key command %r (%s/%s)" % (name, btype, ftype))
    if numkeys and not keywords and len(numkeys) == 1:
        return numkeys[0]
    if keywords and not numkeys:
        return keyword_spec(name, keywords)
    sys.exit("cannot express key specs of %r" % name)


def keyword_spec(name, keywords):
    froms = {k[1] for k in keywords}
    shapes = {(k[2]["lastkey"], k[2]["keystep"], k[2]["limit"]) for k in keywords}
    if len(froms) != 1 or len(shapes) != 1:
        sys.exit("keyword specs of %r differ in shape" % name)
    shape = shapes.pop()
    if shape == (0, 1, 0):
        take = "EachNext"
    elif shape == (-1, 1, 2):
        take = "HalfOfRest"
    else:
        sys.exit("unsupported keyword range %r for %r" % (shape, name))
    return ("keyword", [k[0] for k in keywords], froms.pop(), [], take)


def rust_keys(spec):
    kind = spec[0]
    if kind == "legacy":
        return "KeySpec::Legacy"
    if kind == "none":
        return "KeySpec::None"
    if kind == "numkeys":
        _, at, first, step, errors = spec
        return ("KeySpec::NumKeys { numkeys_at: %d, first: %d, step: %d, "
                "errors: NumKeysErrors::%s }" % (at, first, step, errors))
    _, words, start, skip, take = spec
    words_rs = ", ".join('"%s"' % w.upper() for w in words)
    skip_rs = ", ".join('("%s", %d)' % (o, n) for o, n in skip)
    return ("KeySpec::Keyword { keywords: &[%s], from: %d, skip: &[%s], "
            "take: KeywordTake::%s }" % (words_rs, start, skip_rs, take))


def rust_access(name, specs):
    """One KeyAccess per key spec: the positions an index/range spec covers (begin 0 for a
    spec found by numkeys or keyword) and what its keys need under ACL key permissions, as
    Redis's ACLSelectorCheckKey reads the spec flags (ACCESS: read; INSERT, DELETE, UPDATE:
    write)."""
    out = []
    for i, (flags, btype, bspec, ftype, fspec) in enumerate(key_spec_parts(s) for s in specs):
        if ACCESS_NOT_KEYS.get(name) == i:
            continue
        need = []
        if "access" in flags:
            need.append("access::READ")
        if {"insert", "delete", "update"} & set(flags):
            need.append("access::WRITE")
        begin, last, step = 0, 0, 1
        if btype == "index" and ftype == "range":
            begin, last, step = bspec["index"], fspec["lastkey"], fspec["keystep"]
            assert 0 < begin < 256 and -128 <= last < 128 and 0 < step < 256, specs
        out.append("KeyAccess { begin: %d, last: %d, step: %d, need: %s }"
                   % (begin, last, step, " | ".join(need) or "0"))
    return "&[%s]" % ", ".join(out)


def bits(names, table, module):
    consts = []
    for n in names:
        if n not in table:
            sys.exit("unknown %s %r: extend command/mod.rs and this script" % (module, n))
        consts.append("%s::%s" % (module, table[n]))
    return " | ".join(consts) or "0"


def policies(tips):
    req, resp = "Default", "Default"
    for tip in tips:
        key, _, value = tip.partition(":")
        if key == "request_policy":
            req = REQUEST[value]
        elif key == "response_policy":
            resp = RESPONSE[value]
    return req, resp


def row(info, docs, indent):
    name, arity, flags, first, last, step, cats, tips, specs, subs = info[:10]
    flag_names = list(flags)
    flag_bits = bits(flag_names, FLAGS, "flags")
    if any("not_key" in key_spec_parts(s)[0] for s in specs):
        flag_bits = (flag_bits + " | " if flag_bits != "0" else "") + "flags::SHARD_CHANNEL"
    acl_bits = bits([c.lstrip("@") for c in cats], {a: a.upper() for a in ACL}, "acl")
    req, resp = policies(tips)
    doc = docs.get(name.split("|")[-1], {})
    pad = " " * indent
    out = ["%s// group: %s, since %s" % (pad, doc.get("group", "?"), doc.get("since", "?"))]
    out.append("%sCommandSpec {" % pad)
    fields = [
        'name: "%s"' % name, "arity: %d" % arity, "flags: %s" % flag_bits,
        "first_key: %d" % first, "last_key: %d" % last, "step: %d" % step,
        "keys: %s" % rust_keys(derive_keys(info)),
        "key_access: %s" % rust_access(name, specs),
        "acl_categories: %s" % acl_bits,
        "request_policy: RequestPolicy::%s" % req,
        "response_policy: ResponsePolicy::%s" % resp,
    ]
    out += ["%s    %s," % (pad, f) for f in fields]
    if subs:
        sub_docs = as_map(doc.get("subcommands") or [])
        out.append("%s    subcommands: &[" % pad)
        for sub in sorted(subs, key=lambda s: s[0]):
            sub_doc = {sub[0].split("|")[-1]: as_map(sub_docs.get(sub[0], []))}
            out += row(sub, sub_doc, indent + 8)
        out.append("%s    ]," % pad)
    else:
        out.append("%s    subcommands: &[]," % pad)
    out.append("%s}," % pad)
    return out


def render(infos, docs, version):
    lines = [
        "// @generated by scripts/gen_command_table.py; do not edit by hand.",
        "//! The command table rows, generated from redis-server %s's COMMAND" % version,
        "//! INFO so arity, flags and key positions match the servers exactly.",
        "",
        "use super::{access, acl, flags, CommandSpec, KeyAccess, KeySpec, KeywordTake, NumKeysErrors};",
        "use super::{RequestPolicy, ResponsePolicy};",
        "",
        "/// Every top-level command of redis %s, sorted by name." % version,
        "pub(super) static COMMANDS: &[CommandSpec] = &[",
    ]
    for info in sorted(infos, key=lambda i: i[0]):
        lines += row(info, {info[0]: docs.get(info[0], {})}, 4)
    lines.append("];")
    return "\n".join(lines) + "\n"


def fetch(conn):
    version = as_map_info(conn.call("INFO", "server"))["redis_version"]
    infos = conn.call("COMMAND", "INFO")
    docs = {k: as_map(v) for k, v in as_map(conn.call("COMMAND", "DOCS")).items()}
    missing = {i[0] for i in infos} ^ set(docs)
    if missing:
        sys.exit("COMMAND INFO and COMMAND DOCS disagree on %s" % sorted(missing))
    return version, infos, docs


def as_map_info(text):
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, help="use a running server on 127.0.0.1")
    ap.add_argument("--redis-server", default=os.environ.get("REDIS_SERVER", "redis-server"))
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    proc = tmp = None
    if args.port:
        conn = Conn(args.port)
    else:
        proc, tmp, conn = start_server(args.redis_server)
    try:
        version, infos, docs = fetch(conn)
    finally:
        if proc:
            proc.kill()
            proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    if not version.startswith("7.0."):
        print("warning: table written for 7.0, server is %s" % version, file=sys.stderr)
    with open(args.out, "w") as f:
        f.write(render(infos, docs, version))
    if shutil.which("rustfmt"):
        subprocess.run(["rustfmt", "--edition", "2021", args.out], check=True)
    subs = sum(len(i[9]) for i in infos)
    print("wrote %s: %d commands, %d subcommands" % (args.out, len(infos), subs))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""redis-py against slotgate, as applications use it: sync, asyncio and RedisCluster clients,
each in RESP2 and RESP3. Run by compat/run.py (COMPAT_PROXY=host:port); prints one
`PASS|FAIL|SKIP redis-py/<mode>/<resp>/<case>` line per case (see compat/run.py).

The asyncio client runs the same cases through a small facade that awaits each call, plus
its own concurrent and blocking cases with real tasks. The suite's other half,
compare_masters.py (`make compat`), compares the plain client's every command family with the
owning master on a cluster of its own.
"""

import asyncio
import os
import sys
import traceback
import warnings

import redis
import redis.asyncio

from cases_data import (case_bitmap, case_crossslot_multikey, case_geo, case_handshake,
                        case_hash, case_hyperloglog, case_list, case_multi_exec, case_pipeline,
                        case_script, case_set, case_stream, case_string, case_watch, case_zset)
from cases_service import (case_big_value, case_blocking_pop, case_concurrent, case_health,
                           case_info_role_master, case_keyspace_all_masters, case_pubsub,
                           case_replica_read, case_scan, case_sharded_pubsub, case_wait_replica)
from checks import TIMEOUT, Skip

HOST, PORT = os.environ.get("COMPAT_PROXY", "127.0.0.1:7000").rsplit(":", 1)
PORT = int(PORT)
PREFIX = os.environ.get("COMPAT_PREFIX", "cpython")
# Behind a nutcracker pool of standalone servers (run.py --nutcracker) there is no replica.
REPLICAS = os.environ.get("COMPAT_REPLICAS", "1") != "0"


class Awaiting:
    """Makes an asyncio client look synchronous: every coroutine it returns is awaited."""

    def __init__(self, obj, loop):
        self._obj, self._loop = obj, loop

    def __getattr__(self, name):
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr

        return Awaiting(attr, self._loop)

    def __call__(self, *a, **kw):
        out = self._obj(*a, **kw)
        if asyncio.iscoroutine(out) or isinstance(out, asyncio.Future):
            out = self._loop.run_until_complete(out)
        if type(out).__module__.startswith("redis.") or callable(out):
            return Awaiting(out, self._loop)
        return out


CASES = [
    ("handshake", case_handshake), ("string", case_string), ("hash", case_hash),
    ("list", case_list), ("set", case_set), ("zset", case_zset), ("stream", case_stream),
    ("hyperloglog", case_hyperloglog), ("geo", case_geo), ("bitmap", case_bitmap),
    ("crossslot-multikey", case_crossslot_multikey), ("pipeline-160", case_pipeline),
    ("multi-exec", case_multi_exec), ("watch", case_watch), ("script", case_script),
    ("pubsub", case_pubsub), ("sharded-pubsub", case_sharded_pubsub),
    ("blocking-pop", case_blocking_pop), ("scan", case_scan),
    ("concurrent-20", case_concurrent), ("big-value-2mb", case_big_value),
    ("health", case_health), ("replica-read", case_replica_read),
    ("info-role-master", case_info_role_master), ("wait-replica", case_wait_replica),
    ("keyspace-all-masters", case_keyspace_all_masters),
]


class Ctx:
    """One mode: how to make its clients and name its keys."""

    def __init__(self, mode, proto):
        self.mode, self.proto = mode, proto
        self.cluster = mode == "cluster"
        self.asyncio = mode == "asyncio"
        self.replicas = REPLICAS
        self.loop = asyncio.new_event_loop() if self.asyncio else None
        self.made = []

    def client(self, **kw):
        kw = dict(host=HOST, port=PORT, protocol=self.proto, decode_responses=True,
                  socket_timeout=TIMEOUT + 5, **kw)
        if self.cluster:
            c = redis.RedisCluster(**kw)
        elif self.asyncio:
            c = Awaiting(redis.asyncio.Redis(**kw), self.loop)
        else:
            c = redis.Redis(**kw)
        self.made.append(c)
        return c

    def key(self, name):
        return f"{PREFIX}:{self.mode}:r{self.proto}:{name}"

    def tagged(self, name):
        return "{" + self.key(name) + "}"

    def close(self):
        for c in self.made:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        if self.loop:
            self.loop.close()


def run_mode(mode, proto):
    ctx = Ctx(mode, proto)
    try:
        c = ctx.client()
    except Exception as e:  # noqa: BLE001
        print(f"FAIL redis-py/{mode}/resp{proto}/connect: {e!r}", flush=True)
        return
    for name, fn in CASES:
        label = f"redis-py/{mode}/resp{proto}/{name}"
        try:
            fn(c, ctx)
            print(f"PASS {label}", flush=True)
        except Skip as e:
            print(f"SKIP {label}: {e}", flush=True)
        except Exception as e:  # noqa: BLE001 - any error fails the case, not the program
            frames = [f for f in traceback.extract_tb(e.__traceback__) if "/redis/" not in f.filename
                      and not f.filename.endswith("checks.py")]
            where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
            detail = f"{type(e).__name__}: {e} ({where})".replace("\n", " ")
            print(f"FAIL {label}: {detail}", flush=True)
    ctx.close()


def main():
    warnings.simplefilter("ignore")
    for mode in ("sync", "asyncio", "cluster"):
        for proto in (2, 3):
            run_mode(mode, proto)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Redis's (or Valkey's) own Tcl test suite, run against one node and through slotgate.

What Redis's CI job "test-external-cluster" does (`./runtest --host H --port P --cluster-mode
--tags -slow` against a one-node cluster), once per unit and twice:

- direct: a fresh one-node Redis Cluster (the node owns all 16384 slots; `cluster-enabled
  yes`, `enable-debug-command yes`, protected configs and MODULE allowed, no RDB saves, a
  temporary dir, free ports), the unit run against it;
- proxy: another fresh one-node cluster and `slotgate proxy` in front of it (one worker,
  `allow_admin_commands = true`), the same unit run against the proxy's port.

A unit that passes nothing directly (every test of most integration/* units is
`external:skip`) is not run through the proxy unless --proxy-always.

Each run's output goes to OUT/<unit>.direct.txt and OUT/<unit>.proxy.txt (`/` in the unit's
name becomes `-`), the proxy's log to OUT/<unit>.slotgate.log, a node's log to
OUT/<unit>.<mode>.server.log when its run did not finish. OUT/summary.md lists, per unit,
the tests that pass directly, through the proxy, and directly but not through the proxy
(each with the first error line of the proxy run), and ends with the line

    suite <server version>: N tests pass directly, M through slotgate, K pass directly but
    not through the proxy (E listed exceptions)

Tests named in scripts/server_suite_exceptions.txt (a reason each, inherent to any proxy)
are left out of K and counted in E; the proxy runs skip them (runtest `--skipfile`), so
that one of them raising an exception does not end the rest of its unit. Exits 1 when
K > 0, 2 when interrupted.

    python3 scripts/server_suite.py [--server /usr/bin/redis-server]
        [--suite ~/.cache/slotgate/suites/redis-7.0] [--units unit/type/incr,unit/expire]
        [--tags -slow] [--slotgate target/debug/slotgate] [--jobs 1] [--out DIR]
        [--unit-timeout 600] [--runtest-arg --durable ...] [--proxy-always]

Python 3.11 standard library only; see docs/suite.md.
"""

import argparse
import atexit
import datetime
import os
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slotgate_tools.ports import free_port  # noqa: E402
from slotgate_tools.resp import Conn, RespError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SUITE = os.path.expanduser("~/.cache/slotgate/suites/redis-7.0")  # scripts/install-suites
EXCEPTIONS_FILE = os.path.join(ROOT, "scripts", "server_suite_exceptions.txt")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
OK_LINE = re.compile(r"^\[ok\]: (.*) \((\d+) ms\)$")
ERR_LINE = re.compile(r"^\[err\]: (.*?)(?: in (tests/\S+\.tcl))?$")
# runtest's own ports (and each +10000): a range of PORTS_PER_RUN per run, see runtest_args.
BASEPORT, PORTS_PER_RUN, PORT_RANGES = 10100, 160, 60
_RANGES_IN_USE = set()
PORT_RACE = "couldn't open socket: address already in use"
# A line the test runner itself starts, ending an [err]'s detail lines.
RUNNER_LINE = re.compile(r"^\[(ok|err|skip|ignore|exception|TIMEOUT|\d+/\d+ done)\]")

# ---------------------------------------------------------------------- processes

_LOCK = threading.Lock()
_LIVE = {}  # pgid -> Popen, every process group this script started and has not reaped
_STOPPING = threading.Event()


def spawn(args, **kw):
    """Popen in a new session (its own process group), remembered until `reap`; refused once
    the script is stopping."""
    with _LOCK:
        if _STOPPING.is_set():
            raise RuntimeError("stopping")
        p = subprocess.Popen(args, start_new_session=True, **kw)
        _LIVE[p.pid] = p
    return p


def reap(p):
    """Kills p's whole process group (a runtest's test clients too) and waits for p."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    with _LOCK:
        _LIVE.pop(p.pid, None)


def kill_all():
    _STOPPING.set()
    with _LOCK:
        procs = list(_LIVE.values())
    for p in procs:
        reap(p)


atexit.register(kill_all)


def _on_signal(signum, _frame):
    kill_all()
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------- servers


def wait_for(what, check, seconds=30, proc=None):
    deadline = time.monotonic() + seconds
    last = None
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited ({proc.returncode})")
        try:
            if check():
                return
        except (OSError, RespError) as e:
            last = e
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what} ({last})")
        time.sleep(0.1)


def server_version(server):
    """("Redis", "7.0.15") from `redis-server --version`."""
    out = subprocess.run([server, "--version"], capture_output=True, text=True).stdout
    m = re.match(r"(Redis|Valkey|KeyDB)\S* server v=(\S+)", out)
    if not m:
        raise SystemExit(f"cannot read the version of {server}: {out!r}")
    return m.group(1), m.group(2)


class Node:
    """A one-node Redis Cluster owning every slot, in its own temporary dir."""

    def __init__(self, server, workdir, valkey_major):
        self.dir = tempfile.mkdtemp(prefix="node-", dir=workdir)
        self.port, bus = free_port(), free_port()
        self.log = os.path.join(self.dir, "server.log")
        conf = [
            f"port {self.port}", f"cluster-port {bus}", "bind 127.0.0.1",
            "cluster-enabled yes", "cluster-config-file nodes.conf", f"dir {self.dir}",
            f"logfile {self.log}", 'save ""', "appendonly no", "daemonize no",
            "enable-debug-command yes", "enable-protected-configs yes",
            "enable-module-command yes",
        ]
        if valkey_major >= 9:  # as Valkey's own external cluster CI job
            conf.append("cluster-databases 16")
        path = os.path.join(self.dir, "node.conf")
        with open(path, "w") as f:
            f.write("\n".join(conf) + "\n")
        self.proc = spawn([server, path], cwd=self.dir, stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(self.dir, "stderr.log"), "w"))
        wait_for(f"the node on {self.port}", self._ping, proc=self.proc)
        with Conn(self.port) as c:
            c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
        wait_for("cluster_state:ok", self._cluster_ok, proc=self.proc)

    def _ping(self):
        with Conn(self.port, timeout=2) as c:
            return c.call("PING") == "PONG"

    def _cluster_ok(self):
        with Conn(self.port, timeout=2) as c:
            return "cluster_state:ok" in c.call("CLUSTER", "INFO")

    def stop(self, keep_log=None):
        reap(self.proc)
        if keep_log:
            for name in ("server.log", "stderr.log"):
                src = os.path.join(self.dir, name)
                if os.path.exists(src) and os.path.getsize(src):
                    with open(src, "rb") as s, open(keep_log, "ab") as d:
                        d.write(f"==== {name}\n".encode())
                        shutil.copyfileobj(s, d)
        shutil.rmtree(self.dir, ignore_errors=True)


def ipv6_loopback():
    """Whether this machine can listen on ::1."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


class Proxy:
    """`slotgate proxy` in front of one node: one worker, admin commands forwarded."""

    def __init__(self, binary, node, workdir, log):
        self.port = free_port()
        conf = os.path.join(tempfile.mkdtemp(prefix="proxy-", dir=workdir), "proxy.toml")
        # The IPv6 loopback too, where the machine has one: tests reach the server at ::1
        # as well (unit/introspection's CLIENT LIST IP filter).
        extra = f'extra_listen = ["[::1]:{self.port}"]\n' if ipv6_loopback() else ""
        with open(conf, "w") as f:
            f.write(f'[proxy]\nlisten = "127.0.0.1:{self.port}"\n{extra}threads = 1\n'
                    f"allow_admin_commands = true\n\n"
                    f'[cluster]\nseeds = ["127.0.0.1:{node.port}"]\n')
        self.proc = spawn([binary, "proxy", "--config", conf], stdout=subprocess.DEVNULL,
                          stderr=open(log, "w"))
        wait_for(f"the proxy on {self.port}", self._routes, proc=self.proc)

    def _routes(self):
        # PING is answered by the proxy itself; a keyed read shows it learned the slots.
        with Conn(self.port, timeout=2) as c:
            return c.call("PING") == "PONG" and c.call("EXISTS", "suite:ready") == 0

    def stop(self):
        reap(self.proc)


# ---------------------------------------------------------------------- the suite


def find_tools(server, kind, version):
    """The binaries the suite runs from its src/ (its tests call `src/redis-cli`, Valkey's
    test_helper refuses to start without `src/valkey-server`), found beside the server
    binary (as `<prefix>-cli` or `cli`) or on PATH, of the server's version only.
    -> ({name in src/: path}, [names not found])."""
    prefix = "valkey" if kind == "Valkey" else "redis"
    found, missing = {f"{prefix}-server": server}, []
    here = os.path.dirname(server)
    for tool in ("cli", "benchmark", "check-aof", "check-rdb"):
        name = f"{prefix}-{tool}"
        for cand in (os.path.join(here, name), os.path.join(here, tool), shutil.which(name)):
            if not cand or not os.access(cand, os.X_OK):
                continue
            try:
                out = subprocess.run([cand, "--version"], capture_output=True, text=True,
                                     timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            if re.search(rf"\b{re.escape(version)}\b", out):
                found[name] = cand
                break
        else:
            missing.append(name)
    return found, missing


def make_overlay(suite, tools, dest):
    """A tree to run runtest from without writing into the suite: symlinks to the suite's
    entries, its own tests/tmp (runtest's temporary files and its start-up cleanup stay
    per run), and src/ with the suite's files plus `tools` where the suite has none.
    tests/unit and tests/integration are real directories of symlinked files: Valkey's
    test_helper finds a unit by `file normalize`, which resolves a symlinked directory
    out of the tree (then it looks for `tests//abs/path.tcl`)."""
    for sub in ("", "tests", "src"):
        os.makedirs(os.path.join(dest, sub, "tmp" if sub == "tests" else ""), exist_ok=True)
        have = os.path.join(suite, sub)
        for name in os.listdir(have) if os.path.isdir(have) else []:
            if (sub == "" and name in ("tests", "src")) or (sub == "tests" and name == "tmp"):
                continue
            if sub == "tests" and name in ("unit", "integration"):
                mirror(os.path.join(have, name), os.path.join(dest, sub, name))
                continue
            os.symlink(os.path.join(have, name), os.path.join(dest, sub, name))
    for name, path in tools.items():
        link = os.path.join(dest, "src", name)
        if not os.path.exists(link):
            os.symlink(path, link)
    return dest


def mirror(src, dest):
    """`src`'s directories made anew under `dest`, its files symlinked."""
    for root, _dirs, files in os.walk(src):
        here = os.path.join(dest, os.path.relpath(root, src))
        os.makedirs(here, exist_ok=True)
        for f in files:
            os.symlink(os.path.join(root, f), os.path.join(here, f))


def list_units(suite, tools):
    """The units the suite's test_helper.tcl runs by default (its ::all_tests), asked in an
    overlay with the server binaries (Valkey's runtest refuses to list without
    src/valkey-server)."""
    where = make_overlay(suite, tools, tempfile.mkdtemp(prefix="server-suite-list-"))
    try:
        out = subprocess.run(["./runtest", "--list-tests"], cwd=where, capture_output=True,
                             text=True, timeout=60)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    units = [u.strip() for u in out.stdout.splitlines() if re.match(r"^[\w./-]+$", u.strip())]
    if out.returncode != 0 or not units:
        raise SystemExit(f"./runtest --list-tests in {suite} failed: {out.stdout}{out.stderr}")
    return units


class Run:
    """One unit's run in one mode, parsed from runtest's output."""

    def __init__(self, unit, mode):
        self.unit, self.mode = unit, mode
        self.order = []  # test keys in the order they finished
        self.ok = set()
        self.failed = {}  # key -> first error line
        self.skipped = 0  # [skip] and [ignore] (tags, external:skip, cluster:skip)
        self.status = "not run"  # done | exception | timeout | crashed | harness error
        self.detail = ""  # the exception's first line, the harness error
        self.seconds = 0.0

    @property
    def finished(self):
        return self.status == "done"


def keyed(name, seen):
    """A test's key: its name, `name #2` for its second run in the unit, and so on."""
    seen[name] = seen.get(name, 0) + 1
    return name if seen[name] == 1 else f"{name} #{seen[name]}"


def parse_output(text, run):
    lines = [ANSI.sub("", line).rstrip("\r") for line in text.splitlines()]
    seen = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        m = OK_LINE.match(line)
        if m:
            key = keyed(m.group(1), seen)
            run.order.append(key)
            run.ok.add(key)
        elif line.startswith("[err]: "):
            m = ERR_LINE.match(line)
            key = keyed(m.group(1), seen)
            detail = []
            for nxt in lines[i + 1:]:
                if RUNNER_LINE.match(nxt) or len(detail) == 6:
                    break
                if nxt.strip() or detail:
                    detail.append(nxt.strip())
            # The first line, or more while a quoted value spans lines (INFO's replies).
            first = detail[0] if detail else ""
            for more in detail[1:]:
                if first.count("'") % 2 == 0:
                    break
                first += " / " + more
            first = first if len(first) <= 300 else first[:300] + "..."
            run.order.append(key)
            run.failed[key] = first or "(no detail)"
        elif line.startswith("[exception]: "):
            run.status = "exception"
            rest = line[len("[exception]: "):].strip()
            # "Executing test client: <error>." and the Tcl stack on the next lines
            if not rest.rstrip(".").endswith(":") and rest:
                run.detail = rest
            nxt = [x.strip() for x in lines[i + 1:i + 3] if x.strip()]
            if (not run.detail or run.detail.endswith("client:")) and nxt:
                run.detail = f"{run.detail} {nxt[0]}".strip()
        elif line.startswith("[skip]: ") or line.startswith("[ignore]: "):
            run.skipped += 1
        elif line.startswith("[TIMEOUT]"):
            run.status = "timeout"
            run.detail = "the suite's own no-progress timeout"
        elif re.match(rf"^\[\d+/\d+ done\]: {re.escape(run.unit)} \(", line):
            if run.status == "not run":
                run.status = "done"
        i += 1


def runtest_args(args, port, unit, slot=0):
    """runtest's command line. Its test server listens on a free port of the 32 below
    --baseport and the tests' own ports come from --baseport/--portcount (checked free, then
    bound later): each concurrent run gets its own range (`slot`, one of PORT_RANGES below
    free_port's 20000-32000, picked at random so that two copies of this script rarely
    share one), or two runs started together race for the same port."""
    base = BASEPORT + slot * PORTS_PER_RUN
    return ["./runtest", "--host", "127.0.0.1", "--port", str(port), "--cluster-mode",
            "--tags", args.tags, "--single", unit, "--baseport", str(base),
            "--portcount", str(PORTS_PER_RUN - 40), *args.runtest_arg]


def take_port_range():
    with _LOCK:
        slot = random.choice([i for i in range(PORT_RANGES) if i not in _RANGES_IN_USE])
        _RANGES_IN_USE.add(slot)
    return slot


def run_unit(args, unit, mode, vmajor):
    """One unit in one mode; run again (up to twice) if runtest lost the race for its test
    server's port to another process."""
    for _ in range(3):
        slot = take_port_range()
        try:
            run, raced = run_unit_once(args, unit, mode, vmajor, slot)
        finally:
            with _LOCK:
                _RANGES_IN_USE.discard(slot)
        if not raced:
            break
    return run


def run_unit_once(args, unit, mode, vmajor, slot):
    """One unit in one mode on fresh servers; always tears them down."""
    run, raced = Run(unit, mode), False
    stem = os.path.join(args.out, unit.replace("/", "-"))
    out_path = f"{stem}.{mode}.txt"
    node = proxy = tclrun = None
    started = time.monotonic()
    try:
        node = Node(args.server, args.workdir, vmajor)
        port = node.port
        if mode == "proxy":
            proxy = Proxy(args.slotgate, node, args.workdir, f"{stem}.slotgate.log")
            port = proxy.port
        cmd = runtest_args(args, port, unit, slot)
        if mode == "proxy" and args.skipfile:
            cmd += ["--skipfile", args.skipfile]
        env = dict(os.environ, TERM="dumb")
        with open(out_path, "w") as out:
            out.write(f"# {' '.join(cmd)}\n")
            out.flush()
            tree = make_overlay(args.suite, args.tools,
                                tempfile.mkdtemp(prefix="suite-", dir=args.workdir))
            tclrun = spawn(cmd, cwd=tree, stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env)
            try:
                rc = tclrun.wait(timeout=args.unit_timeout)
            except subprocess.TimeoutExpired:
                rc = None
            reap(tclrun)
        with open(out_path, errors="replace") as f:
            text = f.read()
        parse_output(text, run)
        if PORT_RACE in text and not run.order and rc is not None:
            raced = True
        if rc is None:
            run.status, run.detail = "timeout", f"killed after {args.unit_timeout} s"
        elif run.status == "not run":
            run.status, run.detail = "crashed", f"runtest exited {rc} before the unit was done"
        if proxy and proxy.proc.poll() is not None:
            run.detail += f" (the proxy had exited: {proxy.proc.returncode})"
    except Exception as e:  # a server or proxy that did not start; the harness itself
        if _STOPPING.is_set():
            raise
        run.status, run.detail = "harness error", f"{type(e).__name__}: {e}"
        with open(out_path, "a") as out:
            out.write(f"\n# harness error: {run.detail}\n")
    finally:
        if tclrun:
            reap(tclrun)
        if proxy:
            proxy.stop()
        if node:
            node.stop(keep_log=None if run.finished else f"{stem}.{mode}.server.log")
    run.seconds = time.monotonic() - started
    return run, raced


# ---------------------------------------------------------------------- report


def read_exceptions(path):
    names = {}
    if not os.path.exists(path):
        return names
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, _, reason = line.partition(" # ")
            names[name.strip()] = reason.strip()
    return names


def listed_as(key, exceptions):
    """The exceptions file's entry for test `key` (its name without the ` #2` count): the
    name itself, or a line `/regexp` that matches it (runtest's --skipfile reads those as
    regexps too); None when not listed."""
    name = re.sub(r" #\d+$", "", key)
    if name in exceptions:
        return name
    return next((p for p in exceptions if p.startswith("/") and re.search(p[1:], name)), None)


def proxy_failure(direct, proxy, key):
    """Why `key` (passed directly) did not pass through the proxy: its first error line, or
    how the run ended before reaching it."""
    if proxy is None:
        return "not run through the proxy"
    if key in proxy.failed:
        return proxy.failed[key]
    if proxy.finished:
        return "not reported by the proxy run (skipped there?)"
    # The first test the direct run finished and the proxy run did not is where it stopped.
    missing = [k for k in direct.order if k not in proxy.ok and k not in proxy.failed]
    how = {"exception": "the run aborted with an exception", "timeout": "the run timed out",
           "crashed": "runtest exited early", "harness error": "harness error"}[proxy.status]
    if missing and missing[0] == key:
        return f"{how} in this test: {proxy.detail}"
    return f"not reached: {how}" + (f" ({proxy.detail})" if proxy.status != "exception" else "")


def run_state(r, direct):
    if r is None:
        return "not run" if direct.ok else "not run (nothing passed directly)"
    s = f"{r.status}, {r.seconds:.0f} s"
    return s + (f": {r.detail}" if r.detail and not r.finished else "")


def write_summary(args, version, results, exceptions, elapsed, complete):
    total_direct = total_proxy = total_k = total_e = 0
    unfinished = []
    body = []
    table = ["| unit | direct | proxy | direct, not proxy | direct run | proxy run |",
             "|---|---:|---:|---:|---|---|"]
    for unit in args.units:
        direct, proxy = results.get((unit, "direct")), results.get((unit, "proxy"))
        if direct is None:
            continue
        lost = [k for k in direct.order if k in direct.ok and (proxy is None or k not in proxy.ok)]
        if proxy is None and not direct.ok:
            lost = []
        listed = [k for k in lost if listed_as(k, exceptions)]
        real = [k for k in lost if k not in listed]
        n_proxy = len(proxy.ok) if proxy else 0
        total_direct += len(direct.ok)
        total_proxy += n_proxy
        total_k += len(real)
        total_e += len(listed)

        for r in (direct, proxy):
            if r is not None and not r.finished:
                unfinished.append(f"{unit} ({r.mode}): {r.status}: {r.detail}")
        cells = [unit, str(len(direct.ok)), str(n_proxy),
                 f"{len(real)}{f' (+{len(listed)} listed)' if listed else ''}",
                 run_state(direct, direct), run_state(proxy, direct)]
        table.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ")
                                        for c in cells) + " |")
        if lost:
            body.append(f"\n### {unit}: {len(real)} pass directly but not through the proxy"
                        + (f", {len(listed)} more listed as exceptions" if listed else ""))
            for k in real:
                body.append(f"- `{k}`: {proxy_failure(direct, proxy, k)}")
            for k in listed:
                reason = exceptions[listed_as(k, exceptions)]
                body.append(f"- (exception: {reason}) `{k}`: {proxy_failure(direct, proxy, k)}")
    final = (f"suite {version}: {total_direct} tests pass directly, {total_proxy} through "
             f"slotgate, {total_k} pass directly but not through the proxy "
             f"({total_e} listed exceptions)")
    done = sum(1 for u in args.units if (u, "direct") in results)
    lines = [
        f"# {version} test suite, directly and through slotgate",
        "",
        f"- server: `{args.server}`; suite: `{args.suite}`; slotgate: `{args.slotgate}`",
        "- `" + " ".join(runtest_args(args, "P", "<unit>")) + "` (--baseport: one of 60 ranges from 10100, per run)",
        f"- units run: {done} of {len(args.units)}"
        + ("" if complete else " (interrupted: the rest were not run)")
        + f"; jobs {args.jobs}; per-unit timeout {args.unit_timeout} s; wall time "
        f"{elapsed / 60:.1f} min; exceptions file: `{os.path.relpath(args.exceptions, ROOT)}`"
        f" ({len(exceptions)} names)",
        "- the suite ran with src/ binaries: "
        + ", ".join(f"`{k}` = `{v}`" for k, v in sorted(args.tools.items()))
        + (f"; not found (of version {version}): {', '.join(args.missing_tools)}"
           if args.missing_tools else ""),
        "- a test is counted once per name (a name run twice in a unit counts as `name #2`);"
        " a run that did not finish counts its unreported tests as not passed",
        "",
        "## Per unit",
        "",
        *table,
        "",
    ]
    if unfinished:
        lines += ["## Runs that did not finish", ""]
        lines += [f"- {u}" for u in unfinished] + [""]
    lines += ["## Pass directly, not through the proxy (first error line of the proxy run)"]
    lines += body or ["", "None."]
    lines += ["", final, ""]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(lines))
    return final, total_k


# ---------------------------------------------------------------------- main


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="/usr/bin/redis-server",
                    help="redis-server or valkey-server binary (default %(default)s)")
    ap.add_argument("--suite", default=DEFAULT_SUITE,
                    help="the extracted source tree whose runtest and tests/ to use "
                         "(default %(default)s)")
    ap.add_argument("--units", default="",
                    help="comma-separated units, e.g. unit/type/incr (default: every unit "
                         "of the suite's ./runtest --list-tests)")
    ap.add_argument("--tags", default="-slow", help="runtest's --tags (default %(default)s)")
    ap.add_argument("--slotgate", default=os.path.join(ROOT, "target", "debug", "slotgate"),
                    help="slotgate binary; target/debug/slotgate is built if missing")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--out", default="", help="results dir (default results/suite-<server>-<date>)")
    ap.add_argument("--unit-timeout", type=int, default=600,
                    help="seconds one unit's run may take before it is killed (default 600)")
    ap.add_argument("--runtest-arg", action="append", default=[],
                    help="one more argument for runtest, e.g. --durable (repeatable; "
                         "write --runtest-arg=--durable)")
    ap.add_argument("--proxy-always", action="store_true",
                    help="run a unit through the proxy even if nothing passed directly")
    ap.add_argument("--exceptions", default=EXCEPTIONS_FILE,
                    help="tests left out of K (default scripts/server_suite_exceptions.txt)")
    ap.add_argument("--expect", default="",
                    help="a file of tests that pass through slotgate (`unit | test`, as "
                         "--write-expect writes it): exit 1 only if one of them (of the units "
                         "run) does not, after running its unit through the proxy once more; "
                         "the CI's regression check")
    ap.add_argument("--write-expect", default="",
                    help="write the tests that passed through slotgate to this file")
    return ap.parse_args(argv)


def read_expect(path):
    """{unit: [test keys]} from an --expect file (blank lines and # comments ignored)."""
    expected = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            unit, _, key = line.partition(" | ")
            expected.setdefault(unit.strip(), []).append(key)
    return expected


def write_expect(path, args, version, results):
    with open(path, "w") as f:
        f.write(f"# Tests of the {version} suite that pass through slotgate "
                f"(scripts/server_suite.py --write-expect; `make suite-ci` checks them).\n")
        for unit in args.units:
            proxy = results.get((unit, "proxy"))
            for key in (proxy.order if proxy else []):
                if key in proxy.ok:
                    f.write(f"{unit} | {key}\n")


def regressions(args, results, expected, vmajor):
    """Expected tests that did not pass through the proxy, after one more proxy run of
    each unit that lost some (a timing-sensitive test gets a second chance)."""
    def lost():
        out = {}
        for unit, keys in expected.items():
            if unit not in args.units:
                continue
            proxy = results.get((unit, "proxy"))
            ok = proxy.ok if proxy else set()
            missing = [k for k in keys if k not in ok]
            if missing:
                out[unit] = missing
        return out

    first = lost()
    for unit in first:
        if _STOPPING.is_set():
            break
        again = run_unit(args, unit, "proxy", vmajor)
        print(f"{unit} proxy (again): {len(again.ok)} ok, {len(again.failed)} err, "
              f"{again.status}", flush=True)
        prev = results.get((unit, "proxy"))
        if prev is not None:
            again.ok |= prev.ok
        results[(unit, "proxy")] = again
    return lost()


def make_workdir(args, exceptions):
    """A fresh temporary dir for the runs, with the list of tests the proxy runs skip: the
    listed exceptions, each of which would otherwise end its unit with an exception (SYNC
    refused) and hide every test after it."""
    args.workdir = tempfile.mkdtemp(prefix="server-suite-")
    args.skipfile = None
    if exceptions:
        args.skipfile = os.path.join(args.workdir, "skip-through-proxy.txt")
        with open(args.skipfile, "w") as f:
            f.write("\n".join(exceptions) + "\n")


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    args.server = shutil.which(args.server) or args.server
    args.suite = os.path.abspath(args.suite)
    args.slotgate = os.path.abspath(args.slotgate)
    if not os.path.exists(os.path.join(args.suite, "runtest")):
        raise SystemExit(f"no runtest in {args.suite}")
    kind, ver = server_version(args.server)
    version = f"{kind} {ver}"
    vmajor = int(ver.split(".")[0]) if kind == "Valkey" else 0
    args.tools, args.missing_tools = find_tools(args.server, kind, ver)
    if not os.path.exists(args.slotgate):
        if args.slotgate != os.path.join(ROOT, "target", "debug", "slotgate"):
            raise SystemExit(f"no slotgate binary at {args.slotgate}")
        subprocess.run(["cargo", "build", "-p", "slotgate"], cwd=ROOT, check=True)
    args.units = [u.strip() for u in args.units.split(",") if u.strip()] or list_units(args.suite, args.tools)
    if not args.out:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = os.path.join(ROOT, "results", f"suite-{kind.lower()}-{ver}-{stamp}")
    os.makedirs(args.out, exist_ok=True)
    exceptions = read_exceptions(args.exceptions)
    make_workdir(args, exceptions)
    print(f"{version}: {len(args.units)} units, {args.jobs} at once, results in {args.out}",
          flush=True)

    results = {}
    tasks = queue.Queue()
    for u in args.units:
        tasks.put((u, "direct"))
    pending = [len(args.units) * 2]  # runs not yet finished or dropped
    cond = threading.Condition()

    def finish_one(n=1):
        with cond:
            pending[0] -= n
            cond.notify_all()

    def worker():
        while not _STOPPING.is_set():
            try:
                unit, mode = tasks.get(timeout=0.5)
            except queue.Empty:
                with cond:
                    if pending[0] <= 0:
                        return
                continue
            try:
                run = run_unit(args, unit, mode, vmajor)
            except Exception:
                if _STOPPING.is_set():
                    return
                raise
            if _STOPPING.is_set():
                return  # killed by the interrupt: not a result
            results[(unit, mode)] = run
            note = f" ({run.detail})" if run.detail and not run.finished else ""
            print(f"{unit} {mode}: {len(run.ok)} ok, {len(run.failed)} err, {run.status}, "
                  f"{run.seconds:.0f} s{note}", flush=True)
            if mode == "direct":
                if run.ok or args.proxy_always:
                    tasks.put((unit, "proxy"))
                else:
                    finish_one()  # its proxy run is dropped
            finish_one()

    started = time.monotonic()
    complete = False
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, args.jobs))]
    try:
        for t in threads:
            t.start()
        with cond:
            while pending[0] > 0 and any(t.is_alive() for t in threads):
                cond.wait(timeout=1)
        complete = pending[0] <= 0
    except KeyboardInterrupt:
        print("interrupted: stopping every server and proxy", flush=True)
    finally:
        kill_all()
        for t in threads:
            t.join(timeout=15)
        shutil.rmtree(args.workdir, ignore_errors=True)
    lost = {}
    if args.expect and complete:
        # The main runs' teardown (kill_all) marked the script stopping, which refuses new
        # processes: the second runs need them. An interrupt leaves `complete` false.
        _STOPPING.clear()
        make_workdir(args, exceptions)
        try:
            lost = regressions(args, results, read_expect(args.expect), vmajor)
        finally:
            kill_all()
            shutil.rmtree(args.workdir, ignore_errors=True)
    final, k = write_summary(args, version, results, exceptions,
                             time.monotonic() - started, complete)
    print(final)
    print(f"summary: {os.path.join(args.out, 'summary.md')}")
    if args.write_expect:
        write_expect(args.write_expect, args, version, results)
    if not complete:
        return 2
    if args.expect:
        n = sum(len(v) for v in lost.values())
        print(f"regressions against {os.path.relpath(args.expect, ROOT)}: {n}")
        for unit, keys in lost.items():
            for key in keys:
                print(f"  {unit} | {key}")
        return 1 if n else 0
    return 1 if k > 0 else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Real-client compatibility suite: the client libraries users already have, against slotgate.

Starts one local Redis Cluster (3 masters, 1 replica each) and the debug proxy once, then runs
one small program per language (compat/<lang>/) with the proxy's address. Each program drives
its libraries in every mode they offer (plain/cluster client, RESP2/RESP3) through the cases
applications rely on, checks the values, and prints one line per case:

    PASS <library>/<mode>/<resp>/<case>
    FAIL <library>/<mode>/<resp>/<case>: <what differed>
    SKIP <library>/<mode>/<resp>/<case>: <why the library cannot express it>

Cases for proxy features that are still being built are listed in PENDING below: their
failures are reported as pending and do not fail the run; once such a case passes, the run says
so, and its line in PENDING should go. The last line is

    compat: N passed, M failed, P pending (languages: ...)

and the exit status is 1 when anything failed (a case, a program that crashed, or the setup).

    python3 compat/run.py                    # every language (what `make test` runs)
    python3 compat/run.py --langs all        # every language, also any left out of the default
    python3 compat/run.py --langs go,node    # a subset

Dependencies come from scripts/install-compat-deps (pinned; caches in ~/.m2, ~/.npm, GOMODCACHE
and compat/rust/target). docs/clients.md has the resulting matrix.
"""

import argparse
import fnmatch
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPAT = os.path.join(ROOT, "compat")
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
if not os.path.exists(BIN) and os.environ.get("CARGO_TARGET_DIR"):
    BIN = os.path.join(os.environ["CARGO_TARGET_DIR"], "debug", "slotgate")
LANG_TIMEOUT_S = 420  # one language's program, build included; a hang fails, never blocks CI

# Cases waiting for proxy work in progress: pattern (fnmatch over the case name) -> reason.
# Switch a case on by deleting its line once the feature has merged.
PENDING = {}

ALL_LANGS = ["python", "go", "node", "java", "c", "rust"]
DEFAULT_LANGS = ALL_LANGS  # all fit CI's budget today; drop a slow one here, keep it in `all`


def lang_commands(lang):
    """(build steps, run command, working directory) for one language's program."""
    d = os.path.join(COMPAT, lang)
    if lang == "python":
        return [], [sys.executable, "compat_py.py"], d
    if lang == "go":
        return [["go", "build", "-mod=readonly", "-o", "compat-go", "."]], ["./compat-go"], d
    if lang == "node":
        return [], ["node", "compat.js"], d
    if lang == "java":
        cp_file = os.path.join(d, "target", "classpath.txt")
        cp = open(cp_file).read().strip() if os.path.exists(cp_file) else ""
        build = ["javac", "-Xlint:-options", "-d", "target/classes", "-cp", cp,
                 "Compat.java", "JedisCases.java", "LettuceCases.java"]
        return [build], ["java", "-cp", "target/classes:" + cp, "Compat"], d
    if lang == "c":
        build = ["gcc", "-O1", "-Wall", "-o", "compat-hiredis", "compat_hiredis.c",
                 "-lhiredis", "-lpthread"]
        return [build], ["./compat-hiredis"], d
    if lang == "rust":
        build = ["cargo", "build", "--locked", "--quiet", "--target-dir", "target"]
        return [build], ["./target/debug/slotgate-compat-rust"], d
    raise ValueError(f"unknown language {lang}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One cluster and one proxy for the whole run; torn down on exit, also on failure."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slotgate-compat-all-")
        self.proxy = None
        self.up = False
        self.replicas = 1

    def start(self):
        out = subprocess.run(
            [BIN, "cluster", "up", "--masters", "3", "--replicas", "1", "--dir", self.dir],
            capture_output=True, text=True, timeout=120)
        self.up = True
        if out.returncode != 0:
            raise RuntimeError(f"cluster up failed: {out.stdout}{out.stderr}")
        self.seed = re.search(r"^seed: (\S+)", out.stdout, re.M).group(1)
        self.masters = re.search(r"^masters: (.*)$", out.stdout, re.M).group(1).split()
        for addr in self.masters:
            # Keyspace events are a node setting; the proxy refuses CONFIG SET by design.
            redis_cli(addr, "CONFIG", "SET", "notify-keyspace-events", "KEA")
        self.port = free_port()
        self.start_proxy(["--listen", f"127.0.0.1:{self.port}", "--seed", self.seed])

    def start_proxy(self, args):
        """`slotgate proxy <args>` on self.port, logging to proxy.log; returns once it PONGs."""
        self.log_path = os.path.join(self.dir, "proxy.log")
        with open(self.log_path, "w") as log:
            self.proxy = subprocess.Popen(
                [BIN, "proxy", *args, "--threads", "2"],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, RUST_LOG="warn"))
        deadline = time.monotonic() + 20
        while redis_cli(f"127.0.0.1:{self.port}", "PING", check=False) != "PONG":
            if self.proxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"proxy did not answer PING: {self.log_tail()}")
            time.sleep(0.1)

    def log_tail(self, n=1500):
        try:
            with open(self.log_path) as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop(self):
        if self.proxy is not None and self.proxy.poll() is None:
            self.proxy.terminate()
            try:
                self.proxy.wait(5)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait(5)
        if self.up:
            subprocess.run([BIN, "cluster", "down", "--dir", self.dir],
                           capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_cli(addr, *args, check=True):
    host, port = addr.rsplit(":", 1)
    out = subprocess.run(["redis-cli", "-h", host, "-p", port, *args],
                         capture_output=True, text=True, timeout=10)
    if check and out.returncode != 0:
        raise RuntimeError(f"redis-cli {args} at {addr}: {out.stderr}")
    return out.stdout.strip()


class Tally:
    def __init__(self):
        self.passed, self.failed, self.pending = 0, 0, 0
        self.now_passing = []

    def line(self, lang, line):
        m = re.match(r"^(PASS|FAIL|SKIP) ([^\s:]+):?\s*(.*)$", line)
        if not m:
            return False
        verdict, case, detail = m.group(1), m.group(2), m.group(3)
        reason = next((r for p, r in PENDING.items() if fnmatch.fnmatch(case, p)), None)
        if verdict == "PASS":
            self.passed += 1
            if reason:
                self.now_passing.append(case)
            print(f"ok   {case}", flush=True)
        elif verdict == "SKIP":
            print(f"skip {case}: {detail}", flush=True)
        elif reason:
            self.pending += 1
            print(f"pend {case}: {reason} ({detail[:200]})", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {case}: {detail}", flush=True)
        return True

    def crash(self, lang, why):
        self.failed += 1
        print(f"FAIL {lang}: {why}", flush=True)


class NutcrackerPool(Cluster):
    """Three standalone redis-servers as one nutcracker pool, served by `slotgate proxy
    --nutcracker FILE` from nutcracker's own YAML (docs/nutcracker.md): the drop-in check."""

    def start(self):
        self.replicas = 0
        self.servers = []
        self.masters = []
        for _ in range(3):
            port = free_port()
            self.servers.append(subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--notify-keyspace-events", "KEA"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.masters.append(f"127.0.0.1:{port}")
        for addr in self.masters:
            deadline = time.monotonic() + 20
            while redis_cli(addr, "PING", check=False) != "PONG":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server {addr} did not start")
                time.sleep(0.05)
        self.port = free_port()
        conf = os.path.join(self.dir, "nutcracker.yml")
        with open(conf, "w") as f:
            f.write(f"pool:\n  listen: 127.0.0.1:{self.port}\n  hash: fnv1a_64\n"
                    "  hash_tag: \"{}\"\n  distribution: ketama\n  redis: true\n"
                    "  auto_eject_hosts: false\n  servers:\n")
            f.writelines(f"   - {addr}:1\n" for addr in self.masters)
        self.start_proxy(["--nutcracker", conf])

    def stop(self):
        super().stop()
        for server in getattr(self, "servers", []):
            server.kill()
            server.wait(5)


def run_lang(lang, cluster, tally):
    builds, cmd, cwd = lang_commands(lang)
    t0 = time.monotonic()
    try:
        for b in builds:
            out = subprocess.run(b, cwd=cwd, capture_output=True, text=True,
                                 timeout=LANG_TIMEOUT_S)
            if out.returncode != 0:
                tally.crash(lang, f"build {b[0]} failed: {(out.stdout + out.stderr)[-1500:]}")
                return
        env = dict(os.environ, COMPAT_PROXY=f"127.0.0.1:{cluster.port}",
                   COMPAT_MASTERS=" ".join(cluster.masters), COMPAT_PREFIX=f"c{lang}",
                   COMPAT_REPLICAS=str(cluster.replicas))
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    except (OSError, subprocess.TimeoutExpired) as e:  # a missing toolchain, a hung build
        tally.crash(lang, f"{type(e).__name__}: {e} (toolchains: README; libraries: scripts/install-compat-deps)")
        return
    stderr = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    timer = threading.Timer(LANG_TIMEOUT_S, proc.kill)
    timer.start()
    seen = 0
    try:
        for line in proc.stdout:
            seen += tally.line(lang, line.rstrip("\n"))
        rc = proc.wait()
    finally:
        timer.cancel()
    reader.join(5)
    if rc != 0 or seen == 0:
        tally.crash(lang, f"program exited {rc} after {seen} cases: {''.join(stderr)[-1500:]}")
    print(f"# {lang}: {seen} cases in {time.monotonic() - t0:.1f}s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--langs", default=",".join(DEFAULT_LANGS),
                    help="comma-separated subset of " + ",".join(ALL_LANGS) + ", or all")
    ap.add_argument("--nutcracker", action="store_true",
                    help="behind `slotgate proxy --nutcracker` over three standalone servers "
                         "instead of a cluster (docs/nutcracker.md)")
    args = ap.parse_args()
    langs = ALL_LANGS if args.langs == "all" else args.langs.split(",")
    for lang in langs:
        if lang not in ALL_LANGS:
            ap.error(f"unknown language {lang}")
    started = time.monotonic()
    tally = Tally()
    cluster = NutcrackerPool() if args.nutcracker else Cluster()
    try:
        cluster.start()
        for lang in langs:
            run_lang(lang, cluster, tally)
            if cluster.proxy.poll() is not None:
                tally.crash(lang, f"proxy exited: {cluster.log_tail()}")
                break
    except Exception as e:  # noqa: BLE001 - a setup failure is a failed run
        tally.crash("setup", f"{type(e).__name__}: {e}")
    finally:
        cluster.stop()
    for case in tally.now_passing:
        print(f"note: pending case now passes, switch it on in compat/run.py PENDING: {case}")
    print(f"runtime: {time.monotonic() - started:.1f}s", flush=True)
    print(f"compat: {tally.passed} passed, {tally.failed} failed, {tally.pending} pending "
          f"(languages: {', '.join(langs)})", flush=True)
    return 1 if tally.failed else 0


if __name__ == "__main__":
    sys.exit(main())

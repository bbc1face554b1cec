"""The differential test's command line (`python3 scripts/difftest.py`): the options, the
main loop over generated scripts with its plain and chaos phases, faults, counts and
discrepancy classes, `--repro` and `--jobs`."""

import argparse
import atexit
import collections
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

import faultinject

from .common import BIN, SCRIPT, WATCHDOG, log
from .compare import RELAXATIONS, RELAXED, shard_count_lost_to_chaos, watch_lost_to_chaos
from .env import Env
from .gen import FAMILIES, generate
from .run import Checker
from .script import parse_keep
from .shrink import report_shrunk, rerun_line, show_diff, show_script

DESCRIPTION = ("Differential test: slotgate in front of a Redis Cluster must behave exactly"
               " like one Redis.")


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
        procs.append(subprocess.Popen([sys.executable, SCRIPT] + argv + extra,
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
    ap = argparse.ArgumentParser(description=DESCRIPTION,
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
    ap.add_argument("--sharded", action="store_true",
                    help="behind a [sharded] pool of three standalone servers (docs/nutcracker.md)"
                         " instead of a cluster")
    ap.add_argument("--routes", action="store_true",
                    help="like --sharded, with key-prefix routes ([[routes]]) over the three"
                         " servers: each key family to a pool of its own, pools sharing"
                         " servers (docs/nutcracker.md)")
    ap.add_argument("--near-cache", action="store_true",
                    help="the proxy with [near_cache] on for every key (patterns = [\"*\"]):"
                         " every GET after a key's first read may be answered from the cache"
                         " (docs/hotkeys.md)")
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

    args.sharded = args.sharded or args.routes
    if args.sharded and (args.chaos or args.faults):
        sys.exit("difftest: --sharded has no cluster to move slots in or fail over")
    if args.sharded and args.near_cache:
        sys.exit("difftest: --near-cache runs in front of a cluster, not --sharded")
    env = Env(args.cluster_config, sharded=args.sharded, near_cache=args.near_cache,
              routes=args.routes)
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


def entry():
    """`python3 scripts/difftest.py`: main(), with any crash still ending in the summary line."""
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        print("difftest: 0 passed, 1 failed", flush=True)
        sys.exit(1)

"""Shrinking a failing script to a minimal reproduction (delta debugging over steps, then
over commands, re-running both sides each time) and printing it: the script with both
sides' replies, the first difference, and the command line that reruns it."""

import time

from .common import WATCHDOG
from .compare import RELAXED, classify


def shrink(checker, script, sig, budget_s):
    """Delta debugging over steps, then over commands; a candidate is kept if it still
    shows a discrepancy with the same signature."""
    deadline = time.monotonic() + budget_s
    trials = [0]

    def bad(cand):
        if time.monotonic() > deadline:
            return False
        trials[0] += 1
        WATCHDOG.progress()
        ref, prx = checker.check(cand, timeout=checker.args.shrink_timeout)
        return prx is not None and prx.diff is not None and prx.diff.signature == sig

    def build(units):
        keep = {}
        for si, ci in units:
            if ci is None:
                keep[si] = None
            else:
                keep.setdefault(si, set()).add(ci)
        return script.subset(keep)

    units = [(s.oidx, None) for s in script.steps]
    units = ddmin(units, lambda u: bad(build(u)))
    cur = build(units)
    units = []
    for s in cur.steps:
        units += [(s.oidx, None)] if s.reconnect else [(s.oidx, c.oidx) for c in s.cmds]
    units = ddmin(units, lambda u: bad(build(u)))
    return build(units), trials[0], time.monotonic() > deadline


def ddmin(items, bad):
    n = 2
    while len(items) >= 2:
        chunk = -(-len(items) // n)
        reduced = False
        for i in range(0, len(items), chunk):
            cand = items[:i] + items[i + chunk:]
            if cand and bad(cand):
                items, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(items):
                break
            n = min(len(items), n * 2)
    return items


def show_diff(d, script, indent="  "):
    lines = []
    if d.step is None:
        lines.append(f"{indent}{d.signature}: {d.detail}")
        return lines
    if d.cmd is not None and d.ref is None:
        lines.append(f"{indent}{d.signature} after the last step: {d.detail}")
        return lines
    step = script.steps[d.step]
    lines.append(f"{indent}first differing step {d.step} (c{step.conn}), command {d.ci}:"
                 f" {d.cmd.show()[:200]}")
    lines.append(f"{indent}  reference: {d.ref.show()}")
    lines.append(f"{indent}  proxy:     {d.prx.show()}")
    if d.detail:
        lines.append(f"{indent}  {d.detail}")
    return lines


def show_script(script, ref=None, prx=None, indent="  "):
    lines = []
    for si, step in enumerate(script.steps):
        lines.append(f"{indent}{si:>2}  {step.show()[:600]}")
        if step.reconnect:
            continue
        r = ref.steps[si] if ref and si < len(ref.steps) else None
        p = prx.steps[si] if prx and si < len(prx.steps) else None
        if r is None and p is None:
            continue
        n = max(len(r or []), len(p or []))
        for ci in range(n):
            a = r[ci].show() if r and ci < len(r) else "(not read)"
            b = p[ci].show() if p and ci < len(p) else "(not read)"
            cmd = r[ci].cmd if r and ci < len(r) else p[ci].cmd
            same = p is None or (r is not None and ci < len(r) and ci < len(p)
                                 and classify(r[ci], p[ci], abs(p[ci].at - r[ci].at)) is None)
            mark = "  " if same else "≠ "
            lines.append(f"{indent}    {mark}{cmd.show()[:60]:<40} ref: {a[:300]}")
            if not same and p is not None:
                lines.append(f"{indent}      {'':<40} prx: {b[:300]}")
    return lines


def rerun_line(args, seed, index, keep=None, chaos=False):
    parts = ["python3 scripts/difftest.py", f"--repro {seed}:{index}"]
    if keep:
        parts.append(f"--keep {keep}")
    if args.families_given:
        parts.append(f"--families {','.join(args.fams)}")
    if args.resp3_share != 0.3:
        parts.append(f"--resp3-share {args.resp3_share}")
    if RELAXED:
        parts.append(f"--relax {','.join(sorted(RELAXED))}")
    if chaos:
        parts.append("--chaos")
    return " ".join(parts)


def report_shrink_lines(args, script, small, ref, prx, chaos, trials, timed_out):
    lines = [f"  minimal reproduction ({len(small.steps)} of {len(script.steps)} steps,"
             f" {small.ncmds()} of {script.ncmds()} commands, {trials} trials"
             f"{', shrink time limit hit' if timed_out else ''}):"]
    lines += show_script(small, ref, prx, indent="    ")
    if prx is not None and prx.diff is not None:
        lines += show_diff(prx.diff, small, indent="    ")
    lines.append("    rerun: " + rerun_line(args, script.seed, script.index,
                                            small.keep_spec(script), chaos))
    return lines


def report_shrunk(args, checker, script, sig, chaos, budget):
    small, trials, timed_out = shrink(checker, script, sig, budget)
    ref, prx = checker.check(small, timeout=args.shrink_timeout, stop_on_diff=False)
    lines = report_shrink_lines(args, script, small, ref, prx, chaos, trials, timed_out)
    if small.ncmds() == script.ncmds():
        lines.insert(1, "    (no reduction: no smaller script showed the same discrepancy)")
    if prx is None or prx.diff is None or prx.diff.signature != sig:
        lines.append("    note: this script did not show the discrepancy on its final rerun"
                     " (timing-dependent)")
    return lines

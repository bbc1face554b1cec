"""Check helpers shared by the redis-py cases (compat_py.py runs them; compare_masters.py
uses the timeout too)."""

TIMEOUT = 10


class Skip(Exception):
    """The library cannot express the case in this mode."""


def eq(label, got, want):
    if got != want:
        raise AssertionError(f"{label}: got {str(got)[:200]!r}, want {str(want)[:200]!r}")

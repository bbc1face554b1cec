#!/usr/bin/env python3
"""Differential test: slotgate in front of a Redis Cluster must behave exactly like one Redis.

The command line of the differential test (docs/difftest.md); the code is the package
scripts/difftest/ (its __init__.py says which module holds what). Kept as the entry point
the Makefile, scripts/server_matrix.py and the docs use:

    python3 scripts/difftest.py --scripts 300            # seed printed; random by default
    python3 scripts/difftest.py --seconds 100 --chaos-seconds 30
    python3 scripts/difftest.py --repro 1234:17 [--keep 0,3.1.2]   # one script, verbose
"""

from difftest.cli import entry

if __name__ == "__main__":
    entry()

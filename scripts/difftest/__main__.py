"""`python3 scripts/difftest` (the package directory) runs the same as `scripts/difftest.py`:
this puts scripts/ on the import path, for `slotgate_tools` and `faultinject`."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from difftest.cli import entry  # noqa: E402

entry()

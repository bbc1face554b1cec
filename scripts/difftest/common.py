"""What every part of the differential test uses: where the repository and the proxy binary
are, its one way to print, and the watchdog that aborts a run that stopped making progress."""

import os
import sys
import threading
import time
import traceback

# scripts/difftest/common.py -> the repository
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "difftest.py")  # the command line's entry point
BIN = os.environ.get("SLOTGATE_BIN", os.path.join(ROOT, "target", "debug", "slotgate"))
STALL_S = 240  # watchdog: no script or shrink trial finished for this long -> abort


def log(*a):
    print(*a, flush=True)


class Watchdog(threading.Thread):
    """Aborts (with teardown) if no script or shrink trial finishes for STALL_S seconds."""

    def __init__(self):
        super().__init__(daemon=True)
        self.last = time.monotonic()
        self.env = None

    def progress(self):
        self.last = time.monotonic()

    def run(self):
        while True:
            time.sleep(5)
            if time.monotonic() - self.last > STALL_S:
                log(f"difftest: watchdog: no progress for {STALL_S} s, aborting")
                traceback.print_stack(sys._current_frames()[threading.main_thread().ident])
                if self.env:
                    self.env.stop()
                log("difftest: 0 passed, 1 failed")
                os._exit(3)


WATCHDOG = Watchdog()

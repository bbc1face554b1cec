"""What the repository's Python scripts share, so each is written once: free ports below the
kernel's ephemeral range (`ports`) and the one RESP2/RESP3 codec and blocking connection
(`resp`). Scripts run as `python3 scripts/<name>.py`, which puts `scripts/` on the import path,
so `from slotgate_tools.ports import free_port` just works (compat/python/compare_masters.py,
outside scripts/, adds it itself)."""

"""What the repository's Python scripts share, so each is written once: free ports below the
kernel's ephemeral range (`ports`). Scripts run as `python3 scripts/<name>.py`, which puts
`scripts/` on the import path, so `from slotgate_tools.ports import free_port` just works."""

"""Differential test: slotgate in front of a Redis Cluster must behave exactly like one Redis.

Starts a standalone redis-server (the reference), a local 3-master 1-replica cluster
(`slotgate cluster up`) and `slotgate proxy` in front of it. Generates random, seeded
scripts: a few connections (c0, c1, sometimes c2); each step is one write on one connection
holding a pipeline of 1..200 commands, then the read of that step's replies. Every script
runs against the reference and then against the proxy (each after FLUSHALL, on fresh
connections), and the reply streams are compared per connection, byte for byte except for
the few normalisations in compare.py (NORMALISE/TOLERANCE). Pub/sub messages are separated
from replies and compared at the end, per (receiver, publisher, channel), in order.

On a discrepancy it prints the first differing step with both replies, shrinks the script
(delta debugging, re-running both sides from FLUSHALL each time) and prints the minimal
reproduction plus a command line that reruns it. The last line is exactly
`difftest: N passed, M failed`; exit status 1 if M > 0. See docs/difftest.md.

This package exists so that each concern lives in its own module (it was one 2.6k-line
script); `python3 scripts/difftest.py ARGS` runs it (the Makefile and
scripts/server_matrix.py call it so):

- script.py   the data model: commands, steps, scripts, `--keep` selections, key slots
- gen.py      the seeded generator of scripts, per command family
- compare.py  what counts as the same reply (normalisations), discrepancy classes
- conn.py     client connections and sessions as the runner reads them
- run.py      running a script on the reference and on the proxy, comparing as it goes
- shrink.py   delta debugging to a minimal reproduction, and how it is printed
- chaos.py    live slot moves and failovers (`--chaos`)
- env.py      the reference, the cluster and the proxy, started and torn down
- cli.py      the options and the main loop (`--repro`, `--jobs`, faults)

Python 3 standard library only (raw sockets; the RESP codec is slotgate_tools/resp.py).
"""

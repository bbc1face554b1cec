#!/usr/bin/env python3
"""The machine's floor for a bystander's PING: PINGs to an idle redis-server of their own
(no proxy, nothing else on it), 1 per ms, while `bench scenario big-values` moves 10x100 MB
values through slotgate on the same 2 cores. Prints p50/p99/max of the PINGs taken while
the big-values run was going."""
import socket, subprocess, sys, time, os, tempfile, threading

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

port = free_port()
d = tempfile.mkdtemp()
srv = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                        "--dir", d], stdout=subprocess.DEVNULL)
time.sleep(0.5)
c = socket.create_connection(("127.0.0.1", port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
lat = []
stop = threading.Event()
def pinger():
    while not stop.is_set():
        t = time.perf_counter(); c.sendall(b"PING\r\n"); c.recv(64); lat.append(time.perf_counter() - t)
        time.sleep(0.001)
th = threading.Thread(target=pinger); th.start()
bv = subprocess.run([sys.argv[1], "bench", "scenario", "big-values"] + sys.argv[2:], capture_output=True, text=True)
stop.set(); th.join(); srv.terminate()
print("\n".join(l for l in bv.stdout.splitlines() if "MB" in l or "PING" in l))
lat.sort()
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000
print(f"floor: PINGs to an idle redis-server of their own while big-values ran: {len(lat)} answered, p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms, max {lat[-1]*1000:.2f} ms")

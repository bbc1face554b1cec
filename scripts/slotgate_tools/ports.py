"""Free loopback ports for the servers and proxies a script starts.

Below 32768, so a port picked here cannot be taken meanwhile by an outgoing connection's
ephemeral port (the kernel's range starts above it), and never one this process already
handed out. Nothing assumes a fixed port is free.
"""
import random
import socket

LOW, HIGH = 20000, 32000
_PICKED = set()


def port_is_free(port, host="127.0.0.1"):
    """Whether `port` binds on `host` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port():
    """A port in 20000-32000 that binds now and was not handed out before."""
    rng = random.SystemRandom()
    for _ in range(500):
        p = rng.randint(LOW, HIGH)
        if p not in _PICKED and port_is_free(p):
            _PICKED.add(p)
            return p
    raise RuntimeError(f"no free port in {LOW}-{HIGH}")

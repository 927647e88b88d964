"""Servers that do not outlive the chief: parameter servers and workers (`tfgpu server`) serve
until they are stopped, and with plain Kubernetes Jobs nothing stops them when the chief's Job has
completed: every pod would keep its GPU until someone deletes the Jobs.

So the chief's `tfgpu run`, once the program has exited 0, stays on the chief's own port for at
most ANNOUNCE_S and answers every connection with BANNER (the chief's TensorFlow server is gone
by then, so the port is free, and the job's NetworkPolicy already admits it); and each server asks
the chief's address every POLL_S seconds. A server that reads the banner exits 0 at once; one that
has seen the chief and then finds it unreachable for GONE_S (a chief that failed for good: no
replacement came back within Kubernetes' longest Job back-off, 6 minutes) exits 0 too, saying
why. A chief whose pod is being replaced is unreachable for less than that, and the servers wait
for it. A JobSet's or Trainer's success policy ends the servers anyway; the banner only ends them
a little earlier.
"""

import os
import socket
import sys
import time

TYPE_CHECKING = False  # not `from typing import …`: `tfgpu run` imports this at a chief's end
if TYPE_CHECKING:
    from typing import Callable, Optional, Set

BANNER = b"tfgpu: the chief has completed\n"
ANNOUNCE_S = 3.0  # the chief's wait for its servers: each asks within POLL_S + ASK_TIMEOUT_S
POLL_S = 1.0
ASK_TIMEOUT_S = 1.0
GONE_S = 600.0


def announce(port: int, servers: int, timeout: float = ANNOUNCE_S) -> int:
    """On the chief's port, the banner to each server that asks, until `servers` hosts have been
    told or `timeout`; how many were told. A port that cannot be bound tells nobody."""
    try:
        if socket.has_dualstack_ipv6():
            sock = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        else:
            sock = socket.create_server(("", port))
    except OSError as e:
        _say(f"the chief could not tell its servers it has completed (port {port}: {e.strerror})")
        return 0
    told: Set[str] = set()
    deadline = time.monotonic() + timeout
    with sock:
        while len(told) < servers:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                conn, peer = sock.accept()
            except OSError:  # the timeout
                break
            with conn:
                try:
                    conn.sendall(BANNER)
                    told.add(str(peer[0]))
                except OSError:
                    pass
    _say(f"the chief has completed; told {len(told)} of its {servers} servers")
    return len(told)


def ask(host: str, port: int) -> str:
    """What the chief's address says: "done" (the banner), "up" (something listens: the chief's
    TensorFlow server) or "down" (no name, no listener, no answer)."""
    try:
        with socket.create_connection((host, port), timeout=ASK_TIMEOUT_S) as conn:
            conn.settimeout(ASK_TIMEOUT_S)
            try:
                got = conn.recv(len(BANNER))
            except OSError:  # nothing said: a gRPC server waits for its client to speak first
                return "up"
            return "done" if got == BANNER else "up"
    except OSError:
        return "down"


def follow(
    host: str,
    port: int,
    *,
    ask: "Callable[[str, int], str]" = ask,
    clock: "Callable[[], float]" = time.monotonic,
    sleep: "Callable[[float], None]" = time.sleep,
    gone_s: float = GONE_S,
) -> str:
    """Ask the chief until the run is over; the reason (the caller exits 0 with it)."""
    seen = False
    gone_since: Optional[float] = None
    while True:
        answer = ask(host, port)
        now = clock()
        if answer == "done":
            return "the chief has completed"
        if answer == "up":
            seen, gone_since = True, None
        elif seen:
            gone_since = now if gone_since is None else gone_since
            if now - gone_since >= gone_s:
                return f"the chief has been unreachable for {gone_s:g}s: it failed for good"
        sleep(POLL_S)


def follow_then_exit(host: str, port: int) -> None:
    """In a server's daemon thread: when the run is over, end the process (its TensorFlow server
    holds nothing the run still needs)."""
    why = follow(host, port)
    _say(f"server: {why}; this server ends (exit 0)")
    os._exit(0)


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"tfgpu: {line}\n")
        sys.stderr.flush()
    except Exception:
        pass

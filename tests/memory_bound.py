"""Run a block with a bound on how much more memory this process may take, so that a property
test proves "bounded memory" for each example: a reader that ran away (an alias bomb, a count
turned into a list) gets MemoryError inside the block instead of taking the machine, and the
test fails on it.

RLIMIT_AS (setrlimit(2)) bounds the address space; its soft limit is set to the process's
current size (VmSize, /proc/self/status) plus the allowance, and restored after the block. The
allowance is relative, so TensorFlow's large reservations from earlier tests in the same
session do not matter."""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator
from pathlib import Path

MIB = 1 << 20


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


@contextlib.contextmanager
def memory_bound(allowance_mib: int = 1024) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + allowance_mib * MIB
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

"""Fixtures of the fake driver's tests: the compiled libraries, and a runner for child processes.

The fake reads its configuration once per process and pynvml finds libnvidia-ml.so.1 through
LD_LIBRARY_PATH, so every case runs its C calls in a fresh Python child (`run`), which prints
one JSON object; ctypes loads the libraries by path, pynvml by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import fakegpu

MIB = 1 << 20
GIB = 1 << 30

# Helpers every child gets: `cu`, `rt` (ctypes handles), `ctx()`, `alloc()`, `meminfo()`,
# `nvml` (pynvml, imported on first use), and `out`, printed as JSON at the end.
PRELUDE = r"""
import ctypes, json, os, sys
from ctypes import byref, c_int, c_uint, c_size_t, c_ulonglong, c_void_p, c_char_p, c_float
LIB = os.environ["FAKEGPU_LIBDIR"]
cu = ctypes.CDLL(os.path.join(LIB, "libcuda.so.1"))
rt = ctypes.CDLL(os.path.join(LIB, os.environ.get("FAKEGPU_TEST_CUDART", "libcudart.so.12")))
out = {}

def ctx(dev=0):
    c = c_void_p()
    assert cu.cuDevicePrimaryCtxRetain(byref(c), dev) == 0
    assert cu.cuCtxSetCurrent(c) == 0
    return c

def alloc(n):
    p = c_ulonglong()
    r = cu.cuMemAlloc_v2(byref(p), c_size_t(n))
    return r, p.value

def free(p):
    return cu.cuMemFree_v2(c_ulonglong(p))

def meminfo():
    f, t = c_size_t(), c_size_t()
    assert cu.cuMemGetInfo_v2(byref(f), byref(t)) == 0
    return f.value, t.value

def attr(a, dev=0):
    v = c_int()
    r = cu.cuDeviceGetAttribute(byref(v), a, dev)
    return v.value if r == 0 else ("error", r)

def nvml_used(i=0):
    import pynvml
    m = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i))
    return m.used, m.free, m.total
"""

EPILOGUE = "\nprint(json.dumps(out))\n"


@dataclass
class Child:
    returncode: int
    out: dict[str, Any]
    stderr: str


@pytest.fixture(scope="session")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake driver, compiled once for the session (the only gcc run of the good sources)."""
    return fakegpu.build(tmp_path_factory.mktemp("fakegpu-cache"))


def child_env(libdir: Path, env: dict[str, str] | None) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FAKEGPU_", "CUDA_VISIBLE", "LD_LIBRARY_PATH", "LD_DEBUG"))
    }
    base["LD_LIBRARY_PATH"] = str(libdir)
    base["FAKEGPU_LIBDIR"] = str(libdir)
    base.update(env or {})
    return base


Runner = Callable[..., Child]


@pytest.fixture
def run(libdir: Path) -> Runner:
    """run(code, env={...}, expect_ok=True): run PRELUDE + code + print(out) in a child."""

    def runner(
        code: str, env: dict[str, str] | None = None, *, expect_ok: bool = True, timeout: int = 30
    ) -> Child:
        done = subprocess.run(
            [sys.executable, "-c", PRELUDE + code + EPILOGUE],
            env=child_env(libdir, env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out: dict[str, Any] = {}
        lines = done.stdout.strip().splitlines()
        if lines:
            try:
                out = json.loads(lines[-1])
            except json.JSONDecodeError:
                out = {}
        if expect_ok:
            assert done.returncode == 0, done.stderr
        return Child(done.returncode, out, done.stderr)

    return runner


@pytest.fixture
def spawn(libdir: Path) -> Callable[..., subprocess.Popen[str]]:
    """spawn(code, env): a child that keeps running (reads stdin) until the test closes it."""

    def spawner(code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", PRELUDE + code],
            env=child_env(libdir, env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    return spawner

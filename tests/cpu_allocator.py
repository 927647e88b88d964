"""Whether TensorFlow's CPU allocator keeps statistics, and TensorFlow's own switches that
decide it, so that a test states which kind of host it needs and gets it on any host.

`tf.config.experimental.get_memory_info('/device:CPU:0')` answers only when the CPU device's
allocator keeps statistics (tensorflow/python/tfe_wrapper.cc, `TFE_GetMemoryInfo`, raises
`ValueError: Allocator stats not available for device …` otherwise). Which allocator that is
depends on the host and on two variables TensorFlow reads:

- `TF_CPU_ALLOCATOR_USE_BFC=true`: the CPU device gets a BFC allocator, which always keeps
  statistics (tensorflow/core/common_runtime/process_state.cc, `ProcessState::GetCPUAllocator`).
- Otherwise the registered allocator of the highest priority: oneDNN's `MklCPUAllocator`
  (statistics kept) has priority 200 when oneDNN is on and 50 when it is off, below the default
  CPU allocator's 100 (statistics off unless a profiler enables them)
  (tensorflow/core/common_runtime/threadpool_device.cc, `REGISTER_MEM_ALLOCATOR`;
  tensorflow/core/framework/cpu_allocator_impl.cc). On Linux oneDNN is on by default only on
  CPUs with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX, and `TF_ENABLE_ONEDNN_OPTS` overrides
  that (tensorflow/core/util/util.cc, `DefaultOneDnnPolicy`, `IsMklEnabled`). So an AMD EPYC
  without AVX-512 keeps no statistics by default, one with AVX512_VNNI does, and
  `TF_ENABLE_ONEDNN_OPTS=0` gives "none" on every x86 host.

Measured with tensorflow-cpu 2.21.0 on an AMD EPYC with AVX-512 VNNI: figures by default and
with `TF_CPU_ALLOCATOR_USE_BFC=true`; the ValueError with `TF_ENABLE_ONEDNN_OPTS=0`.
tests/runtime/test_standin_likeness.py checks both switches against real TensorFlow on every
run, so a host or version where they stop working fails there, not silently elsewhere.

    python -m tests.cpu_allocator     # prints which kind of host this is (CI logs it)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The CPU allocator keeps no statistics (oneDNN off: the default allocator wins).
NO_STATS = {"TF_ENABLE_ONEDNN_OPTS": "0"}
# The CPU allocator keeps statistics (a BFC allocator, on any host).
STATS = {"TF_CPU_ALLOCATOR_USE_BFC": "true"}
KINDS = {"no-stats": NO_STATS, "stats": STATS}

PROBE = """
import tensorflow as tf
tf.constant(1.0)
try:
    tf.config.experimental.get_memory_info('/device:CPU:0')
    print('kept')
except ValueError as e:
    print('none:', e)
"""


def host_default(python: str = sys.executable) -> str:
    """What this host's TensorFlow does with neither switch set: 'kept' or 'none: …'."""
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [python, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env, check=True
    )
    return out.stdout.strip().splitlines()[-1]


if __name__ == "__main__":
    answer = host_default()
    kind = "keeps statistics" if answer == "kept" else "keeps NO statistics"
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((x.split(":", 1)[1].strip() for x in lines if "model name" in x), "unknown CPU")
    print(f"this host's TensorFlow CPU allocator {kind} ({cpu}; get_memory_info: {answer})")

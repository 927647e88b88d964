"""What TensorFlow's runtime holds in this process, read without starting it: whether it is up,
and the cap of each capped logical GPU. The metrics (tfgpu.act.metrics) and the recovery watch
(tfgpu.act.recovery) both read TensorFlow's memory through it. Imports nothing, TensorFlow included:
it reads the modules TensorFlow has already imported.

Never initialise TensorFlow's runtime early: `get_memory_info` and `list_logical_devices`
call `context.ensure_initialized()`, after which logical devices, growth and visible
devices can no longer be changed, so a scrape that arrived before the user's first op would
freeze (or break) their configuration. A scrape therefore reads device figures only when
the eager context's `_initialized` flag is already true: it is the very flag
`ensure_initialized()` tests before doing anything, and it is set last, under the context's
lock, after the runtime exists, so once it reads true these calls initialise nothing.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of start-up).
import sys

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, List, Tuple


def runtime_initialized() -> bool:
    """True once TensorFlow's eager context exists and is initialised (module doc).
    Imports nothing: without TensorFlow already imported the answer is False."""
    context_module = sys.modules.get("tensorflow.python.eager.context")
    if context_module is None:
        return False
    context = getattr(context_module, "context_safe", lambda: None)()
    return bool(getattr(context, "_initialized", False))


def logical_gpu_limits(tf: "Any") -> "List[Tuple[str, float]]":
    """(logical device name, cap in MiB) from the configuration TensorFlow holds. Logical GPUs
    are numbered across the physical GPUs in order; reading the configuration initialises
    nothing."""
    out: List[Tuple[str, float]] = []
    index = 0
    for physical in tf.config.list_physical_devices("GPU"):
        configs = tf.config.get_logical_device_configuration(physical) or [None]
        for config in configs:
            limit = getattr(config, "memory_limit", None)
            if limit is not None:
                out.append((f"/device:GPU:{index}", float(limit)))
            index += 1
    return out

"""tfgpu: configure TensorFlow's GPU memory from environment variables.

Kept minimal on purpose: the `.pth` hook imports `tfgpu._hook` at every interpreter
start, which imports this file first, so nothing here may import or cost anything.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # not `from typing import …`: this runs at every interpreter start
if TYPE_CHECKING:
    from typing import Mapping


def is_disabled(environ: "Mapping[str, str]") -> bool:
    """TF_GPU_CONFIG=off: the escape hatch, checked before anything else (by the hook at every
    start, so it lives here, where it costs no import)."""
    return environ.get("TF_GPU_CONFIG", "").strip().lower() in ("off", "false", "0", "no")

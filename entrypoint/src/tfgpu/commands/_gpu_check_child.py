"""Run by `tfgpu check` in a child Python: import TensorFlow, apply the plan, report.

A child, because importing TensorFlow and initialising its runtime cannot be undone and
takes seconds; the parent stays light and survives a crash here. Prints one JSON line
prefixed with tfgpu.commands.gpu_check.MARK on stdout (TensorFlow may print other things).
"""

from __future__ import annotations

import json
import os
import sys

from tfgpu.act.apply import configure_tensorflow
from tfgpu.commands.gpu_check import MARK
from tfgpu.contract.errors import GpuUnavailableError

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from tfgpu.contract.check_report import ChildReport


def main() -> int:
    out: ChildReport = {
        "tensorflow": {
            "importable": False,
            "version": None,
            "is_cuda_build": False,
            "cuda_version": None,
            "cudnn_version": None,
            "error": None,
        },
        "build_info": {},
        "hook_active": False,
        "gpu_unavailable": None,
        "applied": {
            "ok": False,
            "logical_gpus": [],
            "logical_cpus": [],
            "memory": {},
            "error": None,
        },
    }
    try:
        try:
            import tensorflow as tf
        except GpuUnavailableError as e:
            # TF_GPU_REQUIRED=true and TensorFlow sees no usable GPU (the parent's preflight
            # could not tell, e.g. without nvidia-ml-py). That is the answer about the GPU, not
            # about TensorFlow: say so once, and import again without the requirement (a failed
            # import is configured again) to report TensorFlow itself.
            out["gpu_unavailable"] = e.reason
            os.environ["TF_GPU_REQUIRED"] = "false"
            import tensorflow as tf
    except BaseException as e:  # includes the hook's ConfigError: that is the answer
        out["tensorflow"]["error"] = f"{type(e).__name__}: {e}"
        out["applied"]["error"] = out["tensorflow"]["error"]
        print(MARK + json.dumps(out))
        return 0
    # Only now, after `import tensorflow`: importing the hook installs its finder, which would
    # apply the plan where the image has none, and report it as the hook's (not a cost).
    from tfgpu import _hook

    info = dict(tf.sysconfig.get_build_info())  # no cuda_version on CPU builds: .get()
    out["build_info"] = {k: v for k, v in info.items() if isinstance(v, (str, bool, int, float))}
    out["tensorflow"].update(
        {
            "importable": True,
            "version": tf.__version__,
            "is_cuda_build": bool(info.get("is_cuda_build")),
            "cuda_version": info.get("cuda_version"),
            "cudnn_version": info.get("cudnn_version"),
        }
    )
    out["hook_active"] = bool(_hook.state["applied"])
    applied = out["applied"]
    try:
        if not _hook.state["applied"]:  # hook not installed here: apply as it would
            configure_tensorflow(tf)
        gpus = tf.config.list_logical_devices("GPU")  # initialises the runtime
        applied["logical_gpus"] = [d.name for d in gpus]
        applied["logical_cpus"] = [d.name for d in tf.config.list_logical_devices("CPU")]
        for d in gpus:
            with tf.device(d.name):  # prove the device computes, then read its memory
                float(tf.reduce_sum(tf.ones((256, 256))))
            applied["memory"][d.name] = tf.config.experimental.get_memory_info(d.name)
        applied["ok"] = True
    except BaseException as e:
        applied["error"] = f"{type(e).__name__}: {e}"
    print(MARK + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

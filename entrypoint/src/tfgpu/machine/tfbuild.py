"""What TensorFlow build is installed, read from its files without importing it.

`import tensorflow` takes seconds; `tfgpu run` must not pay that. The build facts live in
`tensorflow/python/platform/build_info.py` as the literal argument of
`collections.OrderedDict(…)`, which we read with `ast` (values can be lists, e.g. a CUDA
build's `cuda_compute_capabilities`).
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, Optional


def tensorflow_dir() -> "Optional[str]":
    import importlib.util  # lazily: only `TF_GPU_REQUIRED=true` and `check` need it

    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def build_info(tf_dir: "Optional[str]" = None) -> "Optional[Dict[str, object]]":
    """The `get_build_info()` dict of the installed TensorFlow, or None if it is not installed."""
    tf_dir = tf_dir or tensorflow_dir()
    if tf_dir is None:
        return None
    import ast  # lazily, as above

    try:
        with open(
            os.path.join(tf_dir, "python", "platform", "build_info.py"), encoding="utf-8"
        ) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, (ast.Attribute, ast.Name))
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "OrderedDict"
                and node.args
            ):
                return dict(ast.literal_eval(node.args[0]))
        return {}
    except (OSError, ValueError, SyntaxError, TypeError):
        return {}

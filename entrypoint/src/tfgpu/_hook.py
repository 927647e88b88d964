"""The in-process hook, imported by `tfgpu-hook.pth` at every interpreter start.

It puts a tiny finder at the front of `sys.meta_path`. The finder ignores every import
but `tensorflow` (and `keras`, and pip's resolver module, whose refusal of an image's pin gets
the override hint: tfgpu.act.pip_hint); for `tensorflow` it wraps the real loader so that, right
after `tensorflow/__init__.py` has finished (also when `import keras` pulls TensorFlow in), the
configuration from the environment is applied through `tf.config`, before user code can
create a tensor. A bad value stops there, as `tfgpu run` stops at the door (for a Kubernetes
`command:` that bypasses the entrypoint, the hook is the only check):

- a script, `python -c`, a server: the kit's one-line message on stderr and exit 78 (bad
  configuration) or 69 (TF_GPU_REQUIRED=true, no usable GPU), the entrypoint's codes, without
  a traceback through the kit (SystemExit: `finally` blocks and atexit still run);
- an interactive interpreter, IPython or a notebook kernel (ipykernel), or an import outside
  the main thread, or TFGPU_HOOK_RAISE=1: the error is raised (ConfigError, a ValueError;
  GpuUnavailableError) without the kit's internal frames, so the session survives, shows
  the message and can retry after fixing os.environ. `tfgpu check`'s child sets
  TFGPU_HOOK_RAISE=1: it reports the error instead of dying of it.

Why not `wrapt.register_post_import_hook`: importing wrapt costs ~60 ms (it imports
asyncio), paid by every Python process in the image, most of which never import
TensorFlow; and wrapt <= 1.14 (pinned by TF 2.12-2.15) runs hooks under a global lock.
This module imports nothing that `site` has not already imported, and costs one string
comparison per import.
"""

# No `from __future__ import annotations`: that statement imports the `__future__` module,
# which nothing else at start-up does; the annotations below are quoted instead.
import os
import sys

from tfgpu import is_disabled  # tfgpu/__init__ is already loaded: importing this package ran it

TYPE_CHECKING = False  # not `from typing import …`: this runs at every interpreter start
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Callable, List, Optional, Sequence

# `keras` too: with `import keras`, TensorFlow finishes importing while keras is still half
# initialised, so the Keras part (mixed precision) waits until keras itself has finished.
# pip's resolver: its refusal of a pin of the image gets the override hint (tfgpu.act.pip_hint).
_PIP_FACTORY = "pip._internal.resolution.resolvelib.factory"
_TARGETS = ("tensorflow", "keras", _PIP_FACTORY)
# Read by `tfgpu check`'s child process: did the hook fire in this process?
state = {"installed": False, "applied": False}
_after_keras: "List[Callable[[], None]]" = []  # to run once keras/__init__ has finished


def after_keras(fn: "Callable[[], None]") -> None:
    _after_keras.append(fn)


class _Loader:
    """Delegates to TensorFlow's own loader, then configures the fresh module."""

    def __init__(self, loader: object) -> None:
        self._loader = loader

    def create_module(self, spec: object) -> object:
        return self._loader.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: object) -> None:
        self._loader.exec_module(module)  # type: ignore[attr-defined]
        if getattr(module, "__name__", "") == _PIP_FACTORY:
            try:
                # here: ~1.4 ms (-X importtime) that a Python without pip would pay
                from tfgpu.act.pip_hint import install as hint_pip

                hint_pip(module)
            except Exception:  # never break pip
                pass
            return
        if getattr(module, "__name__", "") == "keras":
            while _after_keras:
                _after_keras.pop(0)()
            return
        # once per process (reload, a second import path)
        if state["applied"] or is_disabled(os.environ):
            return
        state["applied"] = True
        try:
            # here: ~13 ms (-X importtime) at every interpreter start otherwise
            from tfgpu.act.apply import configure_tensorflow

            configure_tensorflow(module, defer_keras=after_keras)
        except Exception as e:
            # The import fails and importlib drops `tensorflow` from sys.modules; a retried
            # import must configure (or fail) again, not come back silently unconfigured.
            state["applied"] = False
            # here: ~0.7 ms of every start (-X importtime)
            from tfgpu.contract.errors import TfgpuError

            if not isinstance(e, TfgpuError):
                sys.stderr.write(
                    f"tfgpu: internal error while configuring TensorFlow "
                    f"({type(e).__name__}: {e}); TF_GPU_CONFIG=off bypasses the kit\n"
                )
                raise
            if _raises_errors():
                # The message is the point; the frames of settings.py and apply.py are not.
                raise e.with_traceback(None) from None
            sys.stderr.write(f"tfgpu: error: {e}\n")
            sys.stderr.flush()
            raise SystemExit(e.exit_code) from None

    def __getattr__(self, name: str) -> object:  # is_package, get_resource_reader, …
        return getattr(self._loader, name)


def _raises_errors() -> bool:
    """Raise (the session goes on) rather than exit: see the module doc."""
    if os.environ.get("TFGPU_HOOK_RAISE", "").strip() in ("1", "true", "yes", "on"):
        return True
    if hasattr(sys, "ps1") or sys.flags.interactive or sys.flags.inspect:
        return True  # the REPL, `python -i`
    if "ipykernel" in sys.modules or "IPython" in sys.modules:
        return True  # a notebook kernel or an IPython shell
    import threading  # already imported: TensorFlow's __init__ has just run

    # SystemExit in another thread would end only that thread, silently.
    return threading.current_thread() is not threading.main_thread()


class _Finder:
    """First on sys.meta_path; acts only on `tensorflow` and `keras`, asking the other finders."""

    def find_spec(
        self,
        fullname: str,
        path: "Optional[Sequence[str]]" = None,
        target: "Optional[ModuleType]" = None,
    ) -> "Optional[ModuleSpec]":
        if fullname not in _TARGETS:  # the only cost every other import pays
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if isinstance(finder, _Finder) or find is None:
                continue
            spec: Optional[ModuleSpec] = find(fullname, path, target)
            if spec is not None:
                loader = getattr(spec, "loader", None)
                # Only a loader of the exec_module protocol is wrapped; any other (zipimporter
                # before Python 3.10: pip from a zipapp, ensurepip's bundled wheel) keeps the
                # default path, since _Loader's create_module/exec_module would fail on it.
                if (
                    loader is not None
                    and not isinstance(loader, _Loader)
                    and hasattr(loader, "exec_module")
                    and hasattr(loader, "create_module")
                ):
                    spec.loader = _Loader(loader)  # type: ignore[assignment]  # duck-typed: importlib.abc costs start-up time
                return spec
        return None

    def invalidate_caches(self) -> None:
        pass


def install() -> None:
    if is_disabled(os.environ) or state["installed"]:
        return
    state["installed"] = True
    sys.meta_path.insert(0, _Finder())
    # started by `tfgpu run` with an exit grace: this process, not one it started (FD:PID)
    if os.environ.get("TFGPU_EXIT_PIPE", "").rpartition(":")[2] == str(os.getpid()):
        from tfgpu.act.exit_guard import watch_handlers  # only then: ~0.8 ms (-X importtime)

        watch_handlers(os.environ)


try:  # noqa: SIM105  (contextlib is not imported at start-up; importing it would cost)
    install()
except Exception:  # never break interpreter start-up (site would print a traceback per start)
    pass

"""The override hint on pip's refusal, for an install that would replace a pin of the image.

pip's own message names the package and the pin ("The user requested (constraint)
tensorflow==2.21.0") but not where the constraint comes from nor how to change it on purpose.
The hook (tfgpu._hook) runs in every Python process of the image, pip's too: when pip's resolver
module loads, this wraps `Factory.get_installation_error` (pip >= 20.3's resolver, where every
unsatisfiable set of requirements is reported), and when a pin of the image's constraints file
(TFGPU_IMAGE_CONSTRAINTS, named in PIP_CONSTRAINT) is among the causes, adds one line saying so.
pip's behaviour and message are unchanged; anything unexpected in pip's internals leaves pip as
it is (the wrapper then does nothing).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Mapping

MODULE = "pip._internal.resolution.resolvelib.factory"


def image_pins(environ: Mapping[str, str]) -> Dict[str, str]:
    """name → the constraint line, of the image's constraints file when pip is given it."""
    path = environ.get("TFGPU_IMAGE_CONSTRAINTS", "")
    if not path or path not in environ.get("PIP_CONSTRAINT", "").split():
        return {}
    from tfgpu.machine.pins import split_requirement  # only on a refusal: ~11 ms (-X importtime)

    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.lstrip().startswith("#"):
                    name, _, _ = split_requirement(line)
                    out[name] = line.strip()
    except OSError:
        return {}
    return out


def hint(names: Any, environ: Mapping[str, str]) -> str:
    """The line for the image's pins among `names` (pip's causes), or ''."""
    from tfgpu.machine.pins import normalize  # only on a refusal: ~11 ms (-X importtime)

    pinned = image_pins(environ)
    hit = sorted({normalize(str(n)) for n in names} & set(pinned))
    if not hit:
        return ""
    lines = ", ".join(pinned[n] for n in hit)
    path = environ.get("TFGPU_IMAGE_CONSTRAINTS")
    accept = " ".join(f"--accept {n}" for n in hit)
    return (
        f"tfgpu: this image pins {lines} ({path}, through PIP_CONSTRAINT): its GPU path was built "
        f"with it. Drop or re-pin the requirement that asks for another; to replace it on "
        f"purpose, run that one install with PIP_CONSTRAINT= (empty), then `tfgpu check --build "
        f"{accept}` (docs/teams.md of the tfgpu kit)\n"
    )


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_installation_error(self: Any, e: Any, *args: Any, **kwargs: Any) -> Any:
        error = original(self, e, *args, **kwargs)
        try:
            names = [getattr(cause.requirement, "name", "") for cause in e.causes]
            line = hint(names, os.environ)
            if line:
                sys.stderr.write(line)
        except Exception:  # pip's internals moved: pip's own message stands alone
            pass
        return error

    get_installation_error.__wrapped__ = original  # type: ignore[attr-defined]
    return get_installation_error


def install(module: Any) -> None:
    """Wrap pip's resolver error report in `module` (pip's factory module), once."""
    factory = getattr(module, "Factory", None)
    original = getattr(factory, "get_installation_error", None)
    if original is None or hasattr(original, "__wrapped__"):
        return
    factory.get_installation_error = _wrap(original)  # type: ignore[union-attr]

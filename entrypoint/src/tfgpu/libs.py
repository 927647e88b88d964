"""Can the CUDA/cuDNN libraries the TensorFlow build needs be loaded? (ctypes, no TensorFlow)

Looked for where TensorFlow looks: the default loader path (LD_LIBRARY_PATH, ld.so.cache),
then the `nvidia/*/lib` folders of site-packages that pip's CUDA wheels install.
"""

from __future__ import annotations

import ctypes
import glob
import os
import site
import sys

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence


def needed(build_info: Mapping[str, object]) -> List[tuple[str, str]]:
    """(name, soname) of the libraries a CUDA build needs; none for a CPU build."""
    if not build_info.get("is_cuda_build"):
        return []
    cuda = str(build_info.get("cuda_version") or "").split(".")[0]
    cudnn = str(build_info.get("cudnn_version") or "").split(".")[0]
    out = []
    if cuda.isdigit():
        # CUDA 11.x keeps libcudart's soname at 11.0 (as TensorFlow's cuda_configure.bzl says)
        cudart = "11.0" if cuda == "11" else cuda
        out += [("cudart", f"libcudart.so.{cudart}"), ("cublas", f"libcublas.so.{cuda}")]
    if cudnn.isdigit():
        out.append(("cudnn", f"libcudnn.so.{cudnn}"))
    return out


def site_dirs() -> List[str]:
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    return dirs + [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def _loaded_path(soname: str) -> Optional[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith(soname):
                    return path
    except OSError:
        pass
    return None


def try_load(name: str, soname: str, dirs: Optional[Sequence[str]] = None) -> Dict[str, object]:
    entry: Dict[str, object] = {
        "name": name,
        "soname": soname,
        "loaded": False,
        "path": None,
        "error": None,
    }
    try:
        ctypes.CDLL(soname)
        entry.update(loaded=True, path=_loaded_path(soname) or soname)
        return entry
    except OSError as e:
        entry["error"] = str(e)
    for d in dirs if dirs is not None else site_dirs():
        for candidate in sorted(glob.glob(os.path.join(d, "nvidia", "*", "lib", soname))):
            try:
                ctypes.CDLL(candidate)
            except OSError as e:
                entry["error"] = str(e)
                continue
            entry.update(loaded=True, path=candidate, error=None)
            return entry
    return entry

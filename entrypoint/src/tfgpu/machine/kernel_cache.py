"""Where the NVIDIA driver keeps the kernels it JIT-compiles from PTX, and whether they outlive the
container: on a GPU that TensorFlow reaches only through PTX (Hopper, Blackwell), every start
without them compiles TensorFlow's kernels again.

The driver's compute cache (CUDA C++ Programming Guide, "CUDA Environment Variables"):
CUDA_CACHE_PATH (default ~/.nv/ComputeCache), CUDA_CACHE_MAXSIZE (bytes; default 1 GiB, at most
4 GiB), CUDA_CACHE_DISABLE=1 turns it off; a driver upgrade empties it. Every kit image sets the
first two (images/gpus.yaml `kernel_cache`); a volume there keeps the kernels across restarts.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple

DEFAULT_MAX_BYTES = 1 << 30  # the driver's default on desktops and servers
LARGEST_MAX_BYTES = 1 << 32  # the most CUDA_CACHE_MAXSIZE can ask for
_GIB = float(1 << 30)
# file systems in memory: a mount of one ends with its container (or, in Kubernetes, its pod)
_IN_MEMORY = ("tmpfs", "ramfs")


def _mounts(mountinfo: str) -> "List[Tuple[str, str]]":
    """(mount point, file system type) of each line of /proc/self/mountinfo (proc(5)): the mount
    point is field 5, the type the first field after the ` - ` separator; octal escapes
    (`\\040` for a space) are decoded."""
    found = []
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields = before.split()
        if not sep or len(fields) < 5 or not after:
            continue
        point = fields[4]
        if "\\" in point:
            point = (
                point.encode("latin-1")
                .decode("unicode_escape")
                .encode("latin-1")
                .decode("utf-8", "replace")
            )
        found.append((point, after.split()[0]))
    return found


def mount_of(path: str, mountinfo: str) -> "Optional[Tuple[str, str]]":
    """The mount (point, type) that holds `path`: the longest mount point that is `path` or one
    of its parents (the last such line wins, as later mounts hide earlier ones)."""
    best: Optional[Tuple[str, str]] = None
    for point, kind in _mounts(mountinfo):
        inside = path == point or path.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, kind)
    return best


def _read_mountinfo() -> "Optional[str]":
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _existing_parent(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


class KernelCache:
    """The driver's compute cache as this process will use it."""

    __slots__ = ("disabled", "max_bytes", "max_note", "mount", "path", "writable")

    def __init__(
        self,
        path: str,
        max_bytes: int,
        max_note: str,
        disabled: bool,
        writable: bool,
        mount: "Optional[Tuple[str, str]]",
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.max_note = max_note  # why max_bytes is not CUDA_CACHE_MAXSIZE as written ("" if it is)
        self.disabled = disabled
        self.writable = writable
        self.mount = mount  # (mount point, type) holding the folder; None when unknown

    @property
    def kept(self) -> "Optional[bool]":
        """Whether the folder outlives the container: on a mount of its own (a volume, a bind
        mount, a Kubernetes emptyDir), not the container's root, whatever file system holds
        it, unless that is memory. None when the mounts are unknown."""
        if self.mount is None:
            return None
        point, kind = self.mount
        return point != "/" and kind not in _IN_MEMORY

    @property
    def keeps_kernels(self) -> bool:
        """The compiled kernels are written and survive a restart of the container."""
        return not self.disabled and self.writable and bool(self.kept)

    def as_json(self) -> "Dict[str, object]":
        return {
            "summary": self.describe(),
            "path": self.path,
            "max_bytes": self.max_bytes,
            "disabled": self.disabled,
            "writable": self.writable,
            "kept": self.kept,
            "mount": None
            if self.mount is None
            else {"point": self.mount[0], "type": self.mount[1]},
        }

    def describe(self) -> str:
        """One line: where compiled kernels go, how many, and whether they stay."""
        if self.disabled:
            return "kernel cache off (CUDA_CACHE_DISABLE=1): every start JIT-compiles again"
        size = f"up to {self.max_bytes / _GIB:g} GiB" + (
            f" ({self.max_note})" if self.max_note else ""
        )
        if not self.writable:
            state = f"not writable by uid {os.getuid()}: compiled kernels are not kept"
        elif self.kept is None:
            state = "writable; whether it outlives the container is unknown"
        elif self.kept:
            kind = self.mount[1] if self.mount else "?"
            state = f"writable, on a volume ({kind}): kept across restarts"
        else:
            where = (
                "in memory" if self.mount and self.mount[1] in _IN_MEMORY else "in the container"
            )
            state = f"writable, {where}: lost when the container ends (mount a volume there)"
        return f"kernel cache {self.path}, {size}, {state}"


def _max_bytes(text: "Optional[str]") -> "Tuple[int, str]":
    if text is None or not text.strip():
        return DEFAULT_MAX_BYTES, ""
    digits = text.strip()
    if not digits.isdigit() or not digits.isascii() or len(digits) > 20:
        return DEFAULT_MAX_BYTES, f"CUDA_CACHE_MAXSIZE={text[:40]!r} is not a number of bytes"
    value = int(digits)
    if value > LARGEST_MAX_BYTES:
        return LARGEST_MAX_BYTES, "CUDA_CACHE_MAXSIZE is above the 4 GiB the driver allows"
    return value, ""


def inspect(environ: "Mapping[str, str]", *, mountinfo: "Optional[str]" = None) -> KernelCache:
    """The cache this process's driver would use, from `environ` (and /proc/self/mountinfo)."""
    path = environ.get("CUDA_CACHE_PATH") or os.path.join(
        environ.get("HOME") or "/", ".nv", "ComputeCache"
    )
    path = os.path.abspath(path)
    max_bytes, note = _max_bytes(environ.get("CUDA_CACHE_MAXSIZE"))
    disabled = environ.get("CUDA_CACHE_DISABLE", "").strip() == "1"
    existing = _existing_parent(path)
    writable = os.path.isdir(existing) and os.access(existing, os.W_OK | os.X_OK)
    info = mountinfo if mountinfo is not None else _read_mountinfo()
    mount = mount_of(os.path.realpath(existing), info) if info else None
    return KernelCache(path, max_bytes, note, disabled, writable, mount)

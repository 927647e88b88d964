"""Will TensorFlow load the CUDA and cuDNN libraries its build needs, and are they new enough?
(ctypes, no TensorFlow)

Before it registers a GPU, a CUDA build of TensorFlow dlopens its CUDA runtime, cuBLAS, cuBLASLt,
cuFFT, cuSOLVER, cuSPARSE and cuDNN, and 2.12/2.13 cuRAND too (the dlopen checker in
libtensorflow_framework.so.2, tsl/platform/default/dlopen_checker.cc); any one missing and
it logs "Cannot dlopen some GPU libraries … Skipping registering GPU devices" and runs on the CPU.
It also refuses a cuDNN whose major differs from its build's or whose minor is lower.

The libraries are looked for where dlopen looks for them when TensorFlow asks: LD_LIBRARY_PATH,
then the RUNPATH of libtensorflow_framework.so.2 (the object whose code calls dlopen; it names some
of the `nvidia/*/lib` folders of NVIDIA's pip wheels, not all), then the loader's cache
(ld.so.cache) and default folders. A library sitting in a folder dlopen does not search does not
count: TensorFlow would not find it either.
"""

from __future__ import annotations

import ctypes
import os
import struct

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence

# sonames by CUDA major (DT_SONAME of NVIDIA's libraries: CUDA 11 keeps libcudart at 11.0 and
# cuFFT at 10; CUDA 12 has cuFFT 11 and cuSOLVER 11)
CUDA_LIBRARIES = {
    "11": (
        ("cudart", "libcudart.so.11.0"),
        ("cublas", "libcublas.so.11"),
        ("cublasLt", "libcublasLt.so.11"),
        ("cufft", "libcufft.so.10"),
        ("cusolver", "libcusolver.so.11"),
        ("cusparse", "libcusparse.so.11"),
    ),
    "12": (
        ("cudart", "libcudart.so.12"),
        ("cublas", "libcublas.so.12"),
        ("cublasLt", "libcublasLt.so.12"),
        ("cufft", "libcufft.so.11"),
        ("cusolver", "libcusolver.so.11"),
        ("cusparse", "libcusparse.so.12"),
    ),
}
# The cuDNN each release was compiled with (tensorflow/docs site/en/install/source.md, "Tested build
# configurations"): build_info's cudnn_version holds the major only, TensorFlow's rule needs the
# minor. The build side keeps the same facts in images/matrix.yaml (a test ties the two).
CUDNN_BUILT_WITH = {
    "2.12": "8.6",
    "2.13": "8.6",
    "2.14": "8.7",
    "2.15": "8.9",
    "2.16": "8.9",
    "2.17": "8.9",
    "2.18": "9.3",
    "2.19": "9.3",
    "2.20": "9.3",
    "2.21": "9.3",
}
FRAMEWORK = "libtensorflow_framework.so.2"


# TensorFlow 2.12 and 2.13 also dlopen cuRAND before registering a GPU (their
# libtensorflow_framework.so.2's dlopen checker; 2.14 dropped it)
WITH_CURAND = ("2.12", "2.13")


def needed(
    build_info: Mapping[str, object], tensorflow: Optional[str] = None
) -> List[tuple[str, str]]:
    """(name, soname) of the libraries a CUDA build dlopens; none for a CPU build."""
    if not build_info.get("is_cuda_build"):
        return []
    cuda = str(build_info.get("cuda_version") or "").split(".")[0]
    cudnn = str(build_info.get("cudnn_version") or "").split(".")[0]
    out = list(CUDA_LIBRARIES.get(cuda, ()))
    if ".".join((tensorflow or "").split(".")[:2]) in WITH_CURAND:
        out.append(("curand", "libcurand.so.10"))
    if cudnn.isdigit() and cudnn.isascii():
        out.append(("cudnn", f"libcudnn.so.{cudnn}"))
    return out


def _dt_paths(path: str) -> List[str]:
    """DT_RUNPATH (else DT_RPATH) of an ELF64 little-endian shared object, split; [] if none.

    A small reader (the standard library has none): the dynamic section's entries, and its
    string table found through the PT_LOAD segment that maps it."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return []
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        loads: List[tuple[int, int, int]] = []
        dynamic: Optional[tuple[int, int]] = None
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(
                "<IIQQQQ", table, i * phentsize
            )
            if p_type == 1:  # PT_LOAD
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == 2:  # PT_DYNAMIC
                dynamic = (p_offset, p_filesz)
        if dynamic is None:
            return []
        f.seek(dynamic[0])
        data = f.read(dynamic[1])
        entries: Dict[int, int] = {}
        for i in range(0, len(data) - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, i)
            if tag == 0:
                break
            entries.setdefault(tag, value)
        which = entries.get(29, entries.get(15))  # DT_RUNPATH, else DT_RPATH
        strtab = entries.get(5)  # DT_STRTAB (a virtual address)
        if which is None or strtab is None:
            return []
        for vaddr, offset, size in loads:
            if vaddr <= strtab < vaddr + size:
                f.seek(strtab - vaddr + offset + which)
                raw = f.read(4096).split(b"\0", 1)[0]
                return raw.decode("utf-8", "replace").split(":")
    return []


def runpath(path: str) -> List[str]:
    """The folders an ELF object's RUNPATH names, `$ORIGIN` expanded; [] when unreadable."""
    try:
        entries = _dt_paths(path)
    except (OSError, struct.error):
        return []
    origin = os.path.dirname(os.path.realpath(path))
    return [
        os.path.normpath(e.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
        for e in entries
        if e
    ]


def search_dirs(tf_dir: Optional[str], environ: Mapping[str, str]) -> List[str]:
    """Where dlopen looks first when TensorFlow asks: LD_LIBRARY_PATH, then TensorFlow's RUNPATH
    (the loader's cache comes after both)."""
    dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    if tf_dir:
        framework = os.path.join(tf_dir, FRAMEWORK)
        if os.path.exists(framework):
            dirs += runpath(framework)
    return list(dict.fromkeys(dirs))  # the first place of each folder counts


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


def _version(name: str, handle: ctypes.CDLL) -> Optional[str]:
    """cudaRuntimeGetVersion (12050 -> 12.5) or cudnnGetVersion (90300 -> 9.3.0, 8906 -> 8.9.6):
    both answer without a GPU or driver."""
    try:
        if name == "cudart":
            value = ctypes.c_int(0)
            if handle.cudaRuntimeGetVersion(ctypes.byref(value)) != 0:
                return None
            return f"{value.value // 1000}.{value.value % 1000 // 10}"
        if name == "cudnn":
            get = handle.cudnnGetVersion
            get.restype = ctypes.c_size_t
            v = int(get())
            if v >= 90000:  # cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH (cudnn_version.h)
                return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
            return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"  # cuDNN 8: MAJOR*1000 + …
    except AttributeError:
        return None
    return None


def try_load(name: str, soname: str, dirs: Sequence[str] = ()) -> Dict[str, object]:
    """Load `soname` the way TensorFlow's dlopen would find it: the first of `dirs` that holds it
    (search_dirs), else the loader's cache. Reports its path and, for the CUDA runtime and cuDNN,
    the version it says it is."""
    entry: Dict[str, object] = {
        "name": name,
        "soname": soname,
        "loaded": False,
        "path": None,
        "version": None,
        "error": None,
    }
    try:
        for d in dirs:
            candidate = os.path.join(d, soname)
            if os.path.exists(candidate):
                handle = ctypes.CDLL(candidate)
                path = candidate
                break
        else:
            handle = ctypes.CDLL(soname)
            path = _loaded_path(soname) or soname
    except OSError as e:
        entry["error"] = str(e)
        return entry
    entry.update(loaded=True, path=path, version=_version(name, handle))
    return entry


def _parts(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit() and p.isascii())


def fits(have: Sequence[int], built: Sequence[int]) -> bool:
    """TensorFlow's rule for the CUDA runtime and the cuDNN it loads: the same major as its
    build's, and a minor not lower. The one copy of the rule: the build side decides with it what
    an image's base lacks (tfgpu_kit.matrix.cudagap), `tfgpu check` what TensorFlow will refuse."""
    return tuple(have[:1]) == tuple(built[:1]) and tuple(have[1:2]) >= tuple(built[1:2])


# TensorFlow's verdict on a cuDNN of its build's major but a lower minor (the official 2.14 bases:
# 8.6 where 2.14 was built with 8.7). The soname is the major's, so the dlopen checker loads it
# and TensorFlow registers the GPU; the version rule runs only when TensorFlow first creates a
# cuDNN handle (CudnnSupport::Init in xla/stream_executor/cuda/cuda_dnn.cc, which logs "Loaded
# runtime CuDNN library: … but source was compiled with: …" and fails): convolutions, pooling,
# batch normalisation and RNN kernels fail, everything else runs on the GPU.
CUDNN_OPS_FAIL = "GPU registered; cuDNN ops will fail"


def cudnn_ops_verdict(name: object, loaded: object, tensorflow: Optional[str]) -> Optional[str]:
    """`GPU registered; cuDNN ops will fail (8.6 < 8.7)` for a loaded cuDNN whose major is the
    build's and whose minor is lower; None for anything else (a library TensorFlow accepts, or
    one it would not even load)."""
    built = CUDNN_BUILT_WITH.get(".".join((tensorflow or "").split(".")[:2]))
    if name != "cudnn" or not isinstance(loaded, str) or built is None:
        return None
    have, want = _parts(loaded), _parts(built)
    if len(have) < 2 or have[:1] != want[:1] or have[1:2] >= want[1:2]:
        return None
    return f"{CUDNN_OPS_FAIL} ({have[0]}.{have[1]} < {built})"


def version_problem(
    lib: Mapping[str, object], build_info: Mapping[str, object], tensorflow: Optional[str]
) -> Optional[str]:
    """TensorFlow's rule for a loaded library (same major, minor not lower than the build's), in
    TensorFlow's own words for cuDNN; None when it holds or cannot be judged."""
    loaded = lib.get("version")
    if not lib.get("loaded") or not isinstance(loaded, str):
        return None
    have = _parts(loaded)
    if lib.get("name") == "cudnn":
        built = CUDNN_BUILT_WITH.get(".".join((tensorflow or "").split(".")[:2]))
        major = str(build_info.get("cudnn_version") or "").split(".")[0]
        if built is None or not built.startswith(major + "."):
            return None  # a release this table does not know: the soname already fixed the major
        if not fits(have, _parts(built)):
            return (
                f"Loaded runtime CuDNN library: {loaded} but source was compiled with: {built}."
                " CuDNN library needs to have matching major version and equal or higher minor"
                " version."
            )
        return None
    if lib.get("name") == "cudart":
        built_cuda = str(build_info.get("cuda_version") or "")
        want = _parts(built_cuda)[:2]
        if len(want) == 2 and not fits(have, want):
            return (
                f"Loaded CUDA runtime {loaded} is older than the CUDA {built_cuda} TensorFlow was"
                " compiled with: it needs the same major version and an equal or higher minor"
                " version."
            )
    return None

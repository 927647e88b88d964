"""What an image's GPU path depends on, as pip sees it: the installed distributions, the pins the
image carries in its pip constraints file (PIP_CONSTRAINT), and whether what is installed now
still satisfies them.

The pinned set is read from what is installed, not from a list kept here (the kit's images get
TensorFlow from different places: the official base, the slim image's wheels, NVIDIA's L4T base):
- every distribution that ships the `tensorflow` package (its top_level.txt or RECORD), and the
  `tensorflow` distribution itself (on arm64 PyPI's `tensorflow` is a shim that requires
  `tensorflow-cpu-aws`, which ships the package): `==` the installed version;
- the requirements of TensorFlow's `[and-cuda]` extra (its Requires-Dist with
  `extra == "and-cuda"`): `==` the installed version where installed (the kit's repaired and
  slim images install exactly that set, locked), else TensorFlow's own pin, so that a team that
  pulls the same set later gets exactly it; every other installed NVIDIA CUDA wheel
  (`nvidia-*-cu11`/`-cu12`) too: mixing CUDA releases breaks cuSOLVER;
- `keras` with TensorFlow's own specifier (`keras<2.16,>=2.15.0` for 2.15, a pin; `keras>=3.x`
  from 2.16 on): a Keras TensorFlow would refuse is refused, a newer Keras 3 is not;
- `tf-keras` and `tfgpu` (the kit's runtime): `==` the installed version.

Nothing else: a constraint only bites when something asks for the package, so an unrelated install
is never stopped (pip docs, "Constraints Files").
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # not `from typing import …`: the build check runs this in every build
if TYPE_CHECKING:
    from typing import Dict, Iterable, List, Optional, Tuple

# roles, as the build check and the SBOM name them
TENSORFLOW = "tensorflow"
CUDA = "cuda"
KERAS = "keras"
TF_KERAS = "tf-keras"
RUNTIME = "runtime"

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_CUDA_WHEEL = re.compile(r"^nvidia-.+-cu1[0-9]$")


def normalize(name: str) -> str:
    """PEP 503's normalized name: `Tf_Keras` and `tf.keras` are `tf-keras`."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Installed:
    """One installed distribution: its name as it spells it, version, and files (RECORD)."""

    __slots__ = ("dist", "name", "version")

    @property
    def location(self) -> str:
        """The folder the distribution is installed in (its site directory)."""
        locate = getattr(self.dist, "locate_file", None)
        return str(locate("")) if locate else ""

    def __init__(self, name: str, version: str, dist: object = None) -> None:
        self.name = name
        self.version = version
        self.dist = dist

    def files(self) -> List[Tuple[str, Optional[int]]]:
        """(absolute path, size from RECORD or None) of every file RECORD lists."""
        files = getattr(self.dist, "files", None) or []
        out = []
        for f in files:
            size = getattr(f, "size", None)
            out.append((str(f.locate()), int(size) if size is not None else None))
        return out

    def unlike_record(self) -> Tuple[List[str], List[str], int]:
        """(missing, resized, checked): the files RECORD lists that are absent, those whose size
        is not RECORD's (`path (A → B bytes)`), and how many it lists. A stat per file: about a
        second for TensorFlow and its CUDA wheels."""
        missing: List[str] = []
        resized: List[str] = []
        files = self.files()
        for path, size in files:
            try:
                st = os.stat(path)
            except OSError:
                missing.append(path)
                continue
            if size is not None and st.st_size != size:
                resized.append(f"{path} ({size} → {st.st_size} bytes)")
        return missing, resized, len(files)

    def requires(self) -> List[str]:
        return list(getattr(self.dist, "requires", None) or [])

    def ships(self, package: str) -> bool:
        """Does this distribution install the top-level package `package`?"""
        read = getattr(self.dist, "read_text", None)
        top = (read("top_level.txt") if read else None) or ""
        if package in top.split():
            return True
        files = getattr(self.dist, "files", None) or []
        return any(str(f).replace(os.sep, "/") == f"{package}/__init__.py" for f in files)


def every(path: Optional[List[str]] = None) -> List[Installed]:
    """Every distribution this Python sees (sys.path, or `path`), in path order, duplicates too."""
    import importlib.metadata

    found = (
        importlib.metadata.distributions()
        if path is None
        else importlib.metadata.distributions(path=path)
    )
    out = []
    for dist in found:
        name = dist.metadata["Name"]
        if name:
            out.append(Installed(name, dist.version, dist))
    return out


def installed(path: Optional[List[str]] = None) -> Dict[str, Installed]:
    """The distributions by normalized name; the first one found wins, as it does for import."""
    out: Dict[str, Installed] = {}
    for dist in every(path):
        out.setdefault(normalize(dist.name), dist)
    return out


def is_cuda_wheel(name: str) -> bool:
    """An NVIDIA CUDA/cuDNN wheel (`nvidia-cudnn-cu12`, `nvidia-cublas-cu11`)."""
    return _CUDA_WHEEL.match(normalize(name)) is not None


def split_requirement(text: str) -> Tuple[str, str, str]:
    """`name [extras] specifier ; marker` → (normalized name, specifier, marker). Old metadata
    writes `name (==1.0)`; the parentheses are dropped."""
    requirement, _, marker = text.partition(";")
    m = _NAME.match(requirement)
    if not m:
        return "", "", marker.strip()
    spec = m.group(3).strip().strip("()").replace(" ", "")
    return normalize(m.group(1)), spec, marker.strip()


def _extra_is(marker: str, extra: str) -> bool:
    """Does `marker` select the extra `extra` (`extra == "and-cuda"`, or `and_cuda`)?"""
    quoted = re.findall(r"""extra\s*==\s*['"]([^'"]+)['"]""", marker)
    return any(normalize(q) == normalize(extra) for q in quoted)


class Pin:
    """One line of the constraints file: `name` must satisfy `spec`; `installed` is its version
    when the image was built (None: not installed then)."""

    __slots__ = ("installed", "name", "role", "spec")

    def __init__(self, name: str, spec: str, role: str, installed: Optional[str]) -> None:
        self.name = name
        self.spec = spec
        self.role = role
        self.installed = installed

    def line(self) -> str:
        return f"{self.name}{self.spec}"

    def as_json(self) -> Dict[str, Optional[str]]:
        return {
            "name": self.name,
            "spec": self.spec,
            "role": self.role,
            "installed": self.installed,
        }

    @classmethod
    def from_json(cls, data: Dict[str, Optional[str]]) -> Pin:
        return cls(str(data["name"]), str(data["spec"]), str(data["role"]), data.get("installed"))


def pinned(dists: Dict[str, Installed]) -> List[Pin]:
    """The image's pinned set (module doc), from what is installed."""
    pins: Dict[str, Pin] = {}

    def exact(name: str, role: str) -> None:
        dist = dists[name]
        pins.setdefault(name, Pin(name, f"=={dist.version}", role, dist.version))

    tf_names = [n for n, d in dists.items() if n == "tensorflow" or d.ships("tensorflow")]
    for name in sorted(tf_names):
        exact(name, TENSORFLOW)
    for name in sorted(tf_names):
        for text in dists[name].requires():
            req, spec, marker = split_requirement(text)
            if not req or not spec:
                continue
            if _extra_is(marker, "and-cuda"):
                if req in dists:
                    exact(req, CUDA)
                else:
                    pins.setdefault(req, Pin(req, spec, CUDA, None))
            elif req == "keras" and "extra" not in marker:
                installed_keras = dists["keras"].version if "keras" in dists else None
                pins.setdefault(req, Pin(req, spec, KERAS, installed_keras))
    for name in sorted(dists):
        if is_cuda_wheel(name):
            exact(name, CUDA)
    for name, role in (("tf-keras", TF_KERAS), ("tfgpu", RUNTIME)):
        if name in dists:
            exact(name, role)
    order = (TENSORFLOW, CUDA, KERAS, TF_KERAS, RUNTIME)
    return sorted(pins.values(), key=lambda p: (order.index(p.role), p.name))


CONSTRAINTS_HEADER = """\
# pip constraints of this tfgpu image: what its GPU path depends on ({what}).
# PIP_CONSTRAINT (pip) and UV_CONSTRAINT (uv pip) point here, so an install that would replace one
# of these fails instead of breaking TensorFlow's GPU (CUDA or cuDNN of another release, another
# TensorFlow). A constraint only applies to what an install asks for: anything else installs.
# To change one on purpose, for one RUN: PIP_CONSTRAINT= pip install ... (uv: UV_CONSTRAINT=), then
# `tfgpu check --build --accept NAME` (docs/teams.md in the tfgpu kit).
"""


def constraints_text(pins: Iterable[Pin], what: str) -> str:
    return CONSTRAINTS_HEADER.format(what=what) + "".join(f"{p.line()}\n" for p in pins)


# --- judging an installed version against a pin --------------------------------------------------
# The pins are `==VERSION` or TensorFlow's own specifiers for keras (`>=`, `<`, `,`): the build
# check judges those without `packaging`, which the image need not have (pip vendors it, but a
# team's image may drop pip). Anything else is reported as not judged, never passed.

_OPS = ("===", "==", "!=", "<=", ">=", "~=", "<", ">")


def _release(version: str) -> Optional[Tuple[int, ...]]:
    m = re.match(r"^v?(\d+(?:\.\d+)*)", version.strip())
    # a component of more than 20 digits is no release of anything (int() refuses 4300 and
    # more): not judged, as any version this reader cannot read
    if not m or any(len(x) > 20 for x in m.group(1).split(".")):
        return None
    parts = [int(x) for x in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:  # 2.15 == 2.15.0 (PEP 440 zero padding)
        parts.pop()
    return tuple(parts)


def satisfies(version: str, spec: str) -> Optional[bool]:
    """Does `version` satisfy `spec` (`==2.21.0`, `<2.16,>=2.15.0`, `>=3.10.0`)? None when either
    uses what this reader does not judge (`~=`, wildcards, pre-releases)."""
    have = _release(version)
    # a final release, or one with a local label or a post-release (`2.11.0+nv23.1`, `2.15.0.post1`)
    if have is None or not re.fullmatch(r"v?[\d.]+(\.post\d+)?(\+[A-Za-z0-9.]+)?", version.strip()):
        return None
    for clause in spec.split(","):
        clause = clause.strip()
        op = next((o for o in _OPS if clause.startswith(o)), None)
        want_text = clause[len(op) :].strip() if op else ""
        want = _release(want_text)
        if op is None or op in ("===", "~=") or want is None or "*" in clause:
            return None
        if op in ("==", "!="):
            # `==2.21.0` is the exact string pip wrote from the installed version; zero padding
            # aside (2.15 == 2.15.0), anything after the release must match as well
            same = version.strip() == want_text or (
                have == want
                and re.fullmatch(r"v?[\d.]+", want_text) is not None
                and re.fullmatch(r"v?[\d.]+", version.strip()) is not None
            )
            if same != (op == "=="):
                return False
        elif not {">=": have >= want, "<=": have <= want, ">": have > want, "<": have < want}[op]:
            return False
    return True

"""NVIDIA Jetson (Tegra): detection and the unified-memory facts, without TensorFlow or NVML.

On a Jetson the GPU has no memory of its own: it allocates from the system RAM it shares with
the CPU, and NVML does not exist (JetPack ships no libnvidia-ml; tegrastats is the board's tool).
So where the kit asks NVML for a card's size elsewhere, on Tegra it reads:

- that it is one: `/etc/nv_tegra_release` (written by L4T's core package, first line
  `# R35 (release), REVISION: 4.1, …`), or the device tree's root `compatible` list
  (`/proc/device-tree/compatible`, NUL-separated) containing `nvidia,tegra…`;
- the memory TensorFlow's percentages and the "cap larger than the device" check use:
  MemTotal of `/proc/meminfo` (proc(5)), and MemAvailable as the free figure;
- the board's name: `/proc/device-tree/model`;
- JetPack, only where the `nvidia-jetpack` package is recorded in dpkg's status file (usually
  on the host, not in containers); otherwise unknown, never guessed from the L4T release.

Every path is read under a root, `TFGPU_SYSROOT` (default `/`), so that tests can point it at
a fake Tegra tree. Standard library only, Python 3.8 too (the L4T r35 images run 3.8).
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

from tfgpu.machine.nvml import Gpu, NvmlReport

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, Iterator, List, Mapping, Optional

SYSROOT_VARIABLE = "TFGPU_SYSROOT"
RELEASE_FILE = "etc/nv_tegra_release"
COMPATIBLE_FILE = "proc/device-tree/compatible"
MODEL_FILE = "proc/device-tree/model"
MEMINFO_FILE = "proc/meminfo"
DPKG_STATUS_FILE = "var/lib/dpkg/status"
UNIFIED_NOTE = "unified memory, shared with the CPU"
SOURCE = "/proc/meminfo (MemTotal, MemAvailable)"

# `# R35 (release), REVISION: 4.1, GCID: …` -> 35.4.1. Patterns, not compiled: `re` is imported
# only on a Tegra (preflight imports this module on every `tfgpu run`; see parse_release).
_RELEASE = r"(?a)#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+)\.(\d+)"
_MEMINFO_LINE = r"(?a)(\w+):\s+(\d+)\s*kB"


def sysroot(environ: "Optional[Mapping[str, str]]" = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get(SYSROOT_VARIABLE) or "/"


def _read(root: str, relative: str) -> "Optional[str]":
    try:
        with open(os.path.join(root, relative), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def is_tegra(root: str) -> bool:
    if os.path.exists(os.path.join(root, RELEASE_FILE)):
        return True
    compatible = _read(root, COMPATIBLE_FILE) or ""
    return any(entry.startswith("nvidia,tegra") for entry in compatible.split("\0"))


def parse_release(text: str) -> "Optional[str]":
    """`35.4.1` from the first line of /etc/nv_tegra_release; None when it is not in that form."""
    import re  # only on a Tegra: with enum, ~5 ms of `tfgpu run` start-up elsewhere

    m = re.search(_RELEASE, text)
    return f"{m.group(1)}.{m.group(2)}.{m.group(3)}" if m else None


def parse_meminfo(text: str) -> "Dict[str, int]":
    """Fields of /proc/meminfo in kB (those given in kB)."""
    import re  # only on a Tegra (parse_release)

    out: Dict[str, int] = {}
    pattern = re.compile(_MEMINFO_LINE)
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_jetpack(dpkg_status: str) -> "Optional[str]":
    """The `nvidia-jetpack` package's version (`5.1.2-b104` -> `5.1.2`), if dpkg lists it."""
    for stanza in dpkg_status.split("\n\n"):
        fields = dict(
            line.split(":", 1) for line in stanza.splitlines() if ":" in line and line[:1] != " "
        )
        if fields.get("Package", "").strip() == "nvidia-jetpack":
            version = fields.get("Version", "").strip()
            return version.split("-", 1)[0] or None
    return None


class TegraReport(NvmlReport):
    """What the kit knows of a Jetson, in NvmlReport's shape (one GPU, sized by the unified
    memory), so that the plan, the preflight and the summaries treat it like any device."""

    def __init__(self) -> None:
        super().__init__()
        self.tegra = True
        self.l4t_release: Optional[str] = None
        self.jetpack: Optional[str] = None
        self.model: Optional[str] = None
        self.unified_total_mib: Optional[float] = None
        self.available_mib: Optional[float] = None

    def driver_json(self) -> "Dict[str, object]":
        out = super().driver_json()
        out["note"] = "Tegra: the GPU driver is part of L4T; NVML does not exist there"
        return out

    def tegra_json(self) -> "Dict[str, object]":
        return {
            "l4t_release": self.l4t_release,
            "jetpack": self.jetpack,
            "model": self.model,
            "unified_memory_total_mib": self.unified_total_mib,
            "unified_memory_available_mib": self.available_mib,
            "memory_source": SOURCE,
            "note": UNIFIED_NOTE,
        }


def query(environ: "Optional[Mapping[str, str]]" = None) -> "Optional[TegraReport]":
    """The Tegra facts under the sysroot, or None when this is not a Jetson."""
    root = sysroot(environ)
    if not is_tegra(root):
        return None
    report = TegraReport()
    report.driver_present = True
    release = _read(root, RELEASE_FILE)
    report.l4t_release = parse_release(release) if release else None
    report.jetpack = parse_jetpack(_read(root, DPKG_STATUS_FILE) or "")
    model = (_read(root, MODEL_FILE) or "").strip("\0 \n") or None
    report.model = model
    mem = parse_meminfo(_read(root, MEMINFO_FILE) or "")
    if "MemTotal" not in mem:
        report.error = f"Tegra: {MEMINFO_FILE} gives no MemTotal; the device's size is unknown"
        return report
    report.found = True
    report.unified_total_mib = mem["MemTotal"] / 1024.0
    report.available_mib = mem.get("MemAvailable", mem.get("MemFree", 0)) / 1024.0
    name = f"{model or 'Tegra GPU'} ({UNIFIED_NOTE})"
    report.gpus = [Gpu(0, name, "", report.unified_total_mib, report.available_mib)]
    return report


def is_report(report: object) -> bool:
    return bool(getattr(report, "tegra", False))


def describe(report: "TegraReport") -> str:
    """The summary line: what the device is and that its memory is the CPU's too."""
    l4t = f"L4T R{report.l4t_release}" if report.l4t_release else "L4T release unknown"
    jetpack = f"JetPack {report.jetpack}" if report.jetpack else "JetPack unknown"
    if report.unified_total_mib is None:
        return f"Jetson ({l4t}, {jetpack}): {report.error}"
    free = report.available_mib or 0.0
    return (
        f"GPU 0: {report.model or 'Tegra GPU'}, {int(report.unified_total_mib)} MiB of "
        f"{UNIFIED_NOTE} ({int(free)} MiB available), {l4t}, {jetpack}"
    )


def metric_families(report: "TegraReport", family: "Any") -> "Iterator[Any]":
    """Device-level figures on a Jetson: the unified memory as /proc/meminfo gives it (all
    processes, CPU and GPU alike). Nothing per GPU: the platform offers no NVML figures."""
    if report.unified_total_mib is None:
        return
    labels = ["source"]
    total = family(
        "tfgpu_unified_memory_total_bytes",
        "Memory the Jetson's CPU and GPU share (MemTotal of /proc/meminfo)",
        labels=labels,
    )
    available = family(
        "tfgpu_unified_memory_available_bytes",
        "Of it, what the kernel estimates is available (MemAvailable of /proc/meminfo)",
        labels=labels,
    )
    total.add_metric(["meminfo"], report.unified_total_mib * (1 << 20))
    available.add_metric(["meminfo"], (report.available_mib or 0.0) * (1 << 20))
    yield total
    yield available


def json_part(report: "NvmlReport") -> "Dict[str, object]":
    """`{"tegra": {...}}` for `tfgpu check --json` on a Jetson; nothing elsewhere."""
    return {"tegra": report.tegra_json()} if isinstance(report, TegraReport) else {}


def facts_lines(facts: "Mapping[str, Any]") -> "List[str]":
    """`tfgpu check`'s lines for the device (from json_part's value), in place of the NVIDIA
    driver's."""
    lines = [
        f"Jetson (Tegra): L4T {facts.get('l4t_release') or 'unknown'}, "
        f"JetPack {facts.get('jetpack') or 'unknown'}; no NVML on this platform (expected)"
    ]
    total = facts.get("unified_memory_total_mib")
    if total is not None:
        lines.append(
            f"  {facts.get('model') or 'Tegra GPU'}: {int(total)} MiB {UNIFIED_NOTE}, "
            f"{int(facts.get('unified_memory_available_mib') or 0)} MiB available ({SOURCE})"
        )
    return lines

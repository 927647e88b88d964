"""The GPUs this process can use, as the runtime sizes caps and percentages by: Tegra's facts on an
NVIDIA Jetson (tfgpu.machine.tegra: its GPU allocates from the system's memory, and there is no
NVML), NVML's everywhere else (tfgpu.machine.nvml). The one place that picks, so that code for other
machines never reaches NVML through the Jetson module. Standard library only, Python 3.8 too.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.machine import nvml, tegra

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Mapping, Optional


def read(environ: "Optional[Mapping[str, str]]" = None) -> "nvml.NvmlReport":
    """Tegra's report on a Jetson (a TegraReport), else NVML's."""
    report = tegra.query(environ)
    return report if report is not None else nvml.query()

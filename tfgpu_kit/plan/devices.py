"""Which host GPUs a container's processes see: NVIDIA_VISIBLE_DEVICES (or a device
request), then CUDA_VISIBLE_DEVICES inside the container.

GPU ids are checked with the runtime's own parser (tfgpu.contract.settings.parse_visible_devices: an
index, a GPU-… UUID or a MIG-… id), and no list is ever built per unit of a count a file gives:
a count is compared with the host's GPUs (or MAX_GPUS) first."""

from __future__ import annotations

from collections.abc import Sequence

from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import is_ascii_number, parse_visible_devices

# The most GPUs plan takes on one host (--gpu-count) or in one pod: DGX-class hosts have 8-16,
# and no PCIe/NVLink host has more than 64.
MAX_GPUS = 64
ID_ACCEPTED = "a GPU index (0), a GPU UUID (GPU-…) or a MIG device id (MIG-…)"


def valid_id(text: str) -> bool:
    """One GPU id as the runtime accepts it in CUDA_VISIBLE_DEVICES (not `-1`, no comma)."""
    try:
        return parse_visible_devices(text, variable="device id") == [text]
    except ConfigError:
        return False


def nvidia_visible(value: str, host_gpus: Sequence[str] | None) -> list[str] | str | None:
    """GPU ids for an NVIDIA_VISIBLE_DEVICES value; None when it needs the host's GPU count and
    that is unknown; a reason (str) for a value the NVIDIA container runtime would refuse.
    `none`, `void` and "" give no GPU."""
    text = value.strip()
    if text in ("", "none", "void"):
        return []
    if text == "all":
        return list(host_gpus) if host_gpus is not None else None
    ids = [part.strip() for part in text.split(",")]
    for gpu in ids:
        if not valid_id(gpu):
            return f"NVIDIA_VISIBLE_DEVICES has {gpu!r}, which is not {ID_ACCEPTED}"
    if len(set(ids)) != len(ids):
        return "NVIDIA_VISIBLE_DEVICES names a GPU twice"
    return ids


def beyond_host(ids: Sequence[str], host_gpus: Sequence[str] | None) -> str | None:
    """The first index in `ids` that the host does not have (any index from MAX_GPUS on, when
    its GPUs are not known)."""
    for gpu in filter(is_ascii_number, ids):
        known = gpu in host_gpus if host_gpus is not None else len(gpu) <= 3 and int(gpu) < MAX_GPUS
        if not known:
            return gpu
    return None


def first_n(count: int, host_gpus: Sequence[str] | None) -> list[str] | str:
    """Docker turns a device request `count: N` into NVIDIA_VISIBLE_DEVICES=0,…,N-1
    (moby daemon/nvidia_linux.go, countToDevices), so the first N GPUs, always. A reason (str)
    when the host has fewer: the NVIDIA runtime refuses the unknown ids and the container does
    not start."""
    have = len(host_gpus) if host_gpus is not None else MAX_GPUS
    if count > have:
        where = (
            f"the host has {have} (--gpu-count or NVML)"
            if host_gpus is not None
            else f"plan takes at most {MAX_GPUS} per host"
        )
        return f"count: {count} asks for more GPUs than {where}: the container would not start"
    if host_gpus is not None:
        return list(host_gpus[:count])
    return [str(index) for index in range(count)]


def cuda_visible(value: str, container_gpus: Sequence[str]) -> list[str]:
    """Apply CUDA_VISIBLE_DEVICES to the GPUs a container sees (its indices count from
    0 inside the container). As the CUDA driver does, an invalid entry hides it and
    everything after it; UUIDs (or unique UUID prefixes) match ids given as UUIDs. (A value
    the runtime refuses is reported by caps.resolve, through the runtime's own parser.)"""
    chosen: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if is_ascii_number(entry) and len(entry) <= 3 and int(entry) < len(container_gpus):
            chosen.append(container_gpus[int(entry)])
            continue
        matches = [gpu for gpu in container_gpus if entry and gpu.startswith(entry)]
        if entry.startswith("GPU-") and len(matches) == 1:
            chosen.append(matches[0])
            continue
        break
    return chosen

"""Which host GPUs a container's processes see: NVIDIA_VISIBLE_DEVICES (or a device
request), then CUDA_VISIBLE_DEVICES inside the container."""

from __future__ import annotations

from collections.abc import Sequence

from tfgpu.settings import is_ascii_number


def nvidia_visible(value: str, host_gpus: Sequence[str] | None) -> list[str] | None:
    """GPU ids for an NVIDIA_VISIBLE_DEVICES value; None when it needs the host's GPU
    count and that is unknown. `none`, `void` and "" give no GPU."""
    text = value.strip()
    if text in ("", "none", "void"):
        return []
    if text == "all":
        return list(host_gpus) if host_gpus is not None else None
    return [part.strip() for part in text.split(",") if part.strip()]


def first_n(count: int, host_gpus: Sequence[str] | None) -> list[str]:
    """Docker turns a device request `count: N` into NVIDIA_VISIBLE_DEVICES=0,…,N-1
    (moby daemon/nvidia_linux.go, countToDevices), so the first N GPUs, always."""
    if host_gpus is not None and count <= len(host_gpus):
        return list(host_gpus[:count])
    return [str(index) for index in range(count)]


def cuda_visible(value: str, container_gpus: Sequence[str]) -> list[str]:
    """Apply CUDA_VISIBLE_DEVICES to the GPUs a container sees (its indices count from
    0 inside the container). As the CUDA driver does, an invalid entry hides it and
    everything after it; UUIDs (or unique UUID prefixes) match ids given as UUIDs."""
    chosen: list[str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if is_ascii_number(entry) and int(entry) < len(container_gpus):
            chosen.append(container_gpus[int(entry)])
            continue
        matches = [gpu for gpu in container_gpus if entry and gpu.startswith(entry)]
        if entry.startswith("GPU-") and len(matches) == 1:
            chosen.append(matches[0])
            continue
        break
    return chosen

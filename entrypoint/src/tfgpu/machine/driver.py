"""Is the host's NVIDIA driver new enough for the CUDA this image was built with?

Explains it the way NVIDIA's own container entrypoints do: what was found, what is
needed, and whether CUDA forward compatibility could help (data-centre GPUs only).
Version floors come from the image (TFGPU_IMAGE_DRIVER_MIN / _MIN_COMPAT, written by the
build side from images/matrix.yaml), not from a table here.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.contract.problems import ERROR, WARNING, Problem

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence, Tuple

    from tfgpu.machine.nvml import Gpu

# NVML brand of data-centre GPUs (NVML_BRAND_TESLA); names as a fallback for old NVML.
_BRAND_TESLA = 2
# A pattern, not compiled: `re` is imported only when the driver is too old (is_datacentre).
_DATACENTRE_NAME = (
    r"\b(Tesla|A100|A30|A40|A10G?|A16|A2|H100|H200|H800|H20|B100|B200|GH200|L4|L40S?|T4|V100)\b"
)
# Driver branches that still get cuda-compat packages, and the CUDA versions they reach: a copy of
# images/matrix.yaml `forward_compat:` (the runtime cannot read images/), held to it by
# tests/build/test_forward_compat_source.py
# (NVIDIA forward-compatibility docs; other branches are end of life).
_FORWARD_COMPAT = {535: ((12, 3), (13, 99)), 570: ((12, 9), (13, 99)), 580: ((13, 1), (13, 99))}


def version_tuple(text: "Optional[str]") -> "Optional[Tuple[int, ...]]":
    r"""The leading version of `text` (`535.104.05` of "535.104.05 (beta)"), read as the regular
    expression `\s*(\d+(?:\.\d+)*)` would (tests/runtime/test_run_startup.py holds it to that),
    by hand: every `tfgpu run` on a GPU reads the driver's, and importing `re` with enum costs
    about 5 ms of start-up (tfgpu.contract.settings)."""
    if not text:
        return None
    rest = text.lstrip()  # str.isspace, as `\s`
    parts: List[int] = []
    start = 0  # an index, not `rest = rest[end + 1:]`: slicing each part off was quadratic
    while True:
        end = start
        while end < len(rest) and rest[end].isdecimal():  # `\d`: Unicode category Nd
            end += 1
        if end == start:
            break
        if end - start > 4300:  # int() would raise (CPython's limit); no version is this long
            return None
        parts.append(int(rest[start:end]))
        if rest[end : end + 1] != "." or not rest[end + 1 : end + 2].isdecimal():
            break
        start = end + 1
    return tuple(parts) if parts else None


def is_datacentre(gpu: "Gpu") -> bool:
    if gpu.brand == _BRAND_TESLA:
        return True
    import re  # only when the driver is too old (check_driver): not on every start (~5 ms)

    return bool(re.search(_DATACENTRE_NAME, gpu.name))


def forward_compat_possible(driver: "Tuple[int, ...]", cuda: "Optional[Tuple[int, ...]]") -> bool:
    span = _FORWARD_COMPAT.get(driver[0])
    return bool(span and cuda and span[0] <= cuda[:2] <= span[1])


def check_driver(
    driver_version: str, image: "Dict[str, str]", gpus: "Sequence[Gpu]"
) -> "List[Problem]":
    driver = version_tuple(driver_version)
    need = version_tuple(image.get("TFGPU_IMAGE_DRIVER_MIN"))
    floor = version_tuple(image.get("TFGPU_IMAGE_DRIVER_MIN_COMPAT"))
    cuda_text = image.get("TFGPU_IMAGE_CUDA", "")
    cuda = version_tuple(cuda_text)
    if driver is None or need is None or driver >= need:
        return []
    built = f"CUDA {cuda_text}" if cuda_text else "its CUDA"
    fix = (
        f"update the host's NVIDIA driver to {image['TFGPU_IMAGE_DRIVER_MIN']} or later, or "
        "use an image built for an older CUDA"
    )
    if floor is not None and driver >= floor:
        return [
            Problem(
                WARNING,
                f"This container was built for {built}, which wants NVIDIA driver "
                f"{image['TFGPU_IMAGE_DRIVER_MIN']} or "
                f"later; driver {driver_version} was detected. It runs in CUDA minor-version "
                "compatibility mode "
                f"(driver >= {image['TFGPU_IMAGE_DRIVER_MIN_COMPAT']}): no JIT of newer PTX, so "
                "GPUs newer than the "
                "architectures TensorFlow was compiled for may fail, and a few newer CUDA "
                "features are missing.",
                fix,
            )
        ]
    what = (
        f"This container was built for NVIDIA driver {image['TFGPU_IMAGE_DRIVER_MIN']} or later "
        f"({built}"
        + (
            f"; {image['TFGPU_IMAGE_DRIVER_MIN_COMPAT']} or later with minor-version compatibility"
            if floor
            else ""
        )
        + f"), but driver {driver_version} was detected: TensorFlow cannot use the GPU and will "
        "run on the CPU."
    )
    datacentre = [g for g in gpus if is_datacentre(g)]
    if datacentre and forward_compat_possible(driver, cuda):
        what += (
            f" Forward compatibility could apply ({datacentre[0].name} is a data-centre GPU on "
            "driver branch "
            f"{driver[0]}): install the cuda-compat package for {built} in the image."
        )
    elif datacentre:
        what += (
            f" Forward compatibility is not available for driver branch {driver[0]} with {built}."
        )
    elif gpus:
        what += (
            " Forward compatibility does not apply: it is for data-centre GPUs only "
            f"({gpus[0].name} is not)."
        )
    return [Problem(ERROR, what, fix)]

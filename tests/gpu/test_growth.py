"""Memory growth, seen at the driver: with growth TensorFlow's first device allocation is
small; without it TensorFlow takes its whole region (the cap, or its default share of the
card) at once. The image turns growth on by default; a user can turn it off either way.

The first allocation is read from the fake driver's log, so these claims are shown on the
fake driver only (on a real card the NVML figure includes the CUDA context)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gpu.harness import CARD, MIB, GpuHost

CAP = 4096


@pytest.fixture(autouse=True)
def _fake_only(gpu_host: GpuHost) -> None:
    if gpu_host.real:
        pytest.skip("reads the fake driver's allocation log; a real card has none")


def test_growth_is_the_image_default(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """Image default (growth on): the first allocation is small, far below the cap"""
    run = gpu_host.probe(image, "touch", env={"TF_GPU_MEM_LIMIT": str(CAP)})
    assert run.exit_code == 0, run.tail()
    assert "memory growth on (image default)" in run.stderr
    sizes = run.allocations()
    assert sizes, run.tail()
    assert sizes[0] <= 64 * MIB < CAP * MIB
    assert sum(sizes) < CAP * MIB
    figures.update(first_allocation_bytes=sizes[0], allocated_bytes=sum(sizes))


@pytest.mark.parametrize(
    "override",
    [{"TF_GPU_MEMORY_GROWTH": "false"}, {"TF_FORCE_GPU_ALLOW_GROWTH": "false"}],
    ids=["kit-variable", "native-variable"],
)
def test_growth_off_takes_the_whole_cap_at_once(
    gpu_host: GpuHost, image: str, override: dict[str, str], figures: dict[str, Any]
) -> None:
    """A user's growth=false overrides the image: the first allocation is the whole cap"""
    run = gpu_host.probe(image, "touch", env={"TF_GPU_MEM_LIMIT": str(CAP), **override})
    assert run.exit_code == 0, run.tail()
    assert "memory growth off" in run.stderr
    sizes = run.allocations()
    assert sizes and sizes[0] == CAP * MIB, sizes[:3]
    figures.update(override=override, first_allocation_bytes=sizes[0])


def test_no_cap_no_growth_takes_tensorflows_default_share(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """No cap, growth off: TensorFlow takes its default share of the card in one allocation"""
    run = gpu_host.probe(image, "touch", env={"TF_GPU_MEMORY_GROWTH": "false"})
    assert run.exit_code == 0, run.tail()
    [created] = run.created
    # TensorFlow's default: nearly all of the free memory, less a reserve it keeps back
    assert CARD.memory_mib // 2 < created.mb < CARD.memory_mib
    sizes = run.allocations()
    assert sizes and sizes[0] == created.mb * MIB
    figures.update(card_mib=CARD.memory_mib, default_share_mb=created.mb)

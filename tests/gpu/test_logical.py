"""TF_GPU_VIRTUAL_DEVICES: one card split into logical GPUs of the given sizes (the seeds'
two models on one 16 GiB card), and `;` groups for several cards."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gpu.harness import CARD, GpuHost


def test_one_card_split_in_two(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any]
) -> None:
    """TF_GPU_VIRTUAL_DEVICES=6144,8192: two logical GPUs of those sizes on GPU 0"""
    run = gpu_host.probe(runtime_image, "touch", env={"TF_GPU_VIRTUAL_DEVICES": "6144,8192"})
    assert run.exit_code == 0, run.tail()
    assert [(c.logical, c.mb, c.physical) for c in run.created] == [(0, 6144, 0), (1, 8192, 0)]
    result = run.probe
    assert result["logical_gpus"] == ["/device:GPU:0", "/device:GPU:1"]
    # a tensor was placed on each: both allocators are in use
    assert all(m["current"] > 0 for m in result["memory"].values()), result
    figures.update(created=[(c.logical, c.mb, c.physical) for c in run.created])


def test_groups_for_two_cards(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any]
) -> None:
    """TF_GPU_VIRTUAL_DEVICES=6144,8192;4096: GPU 0 in two, GPU 1 as one of 4096"""
    run = gpu_host.probe(
        runtime_image, "touch", env={"TF_GPU_VIRTUAL_DEVICES": "6144,8192;4096"}, cards=(CARD, CARD)
    )
    if gpu_host.real and len(run.totals) < 2:
        pytest.skip("this host has one GPU; groups need two")
    assert run.exit_code == 0, run.tail()
    got = [(c.logical, c.mb, c.physical) for c in run.created]
    assert got == [(0, 6144, 0), (1, 8192, 0), (2, 4096, 1)]
    assert len(run.probe["logical_gpus"]) == 3
    figures.update(created=got)

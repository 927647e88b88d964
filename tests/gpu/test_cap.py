"""TF_GPU_MEM_LIMIT: TensorFlow's own GPU runtime creates its device with the cap, and stops
there (ResourceExhausted) before the card runs out. Proved with real TensorFlow in the kit
image on the fake driver (CI) or a real card (--real-gpu)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gpu.harness import CARD, MIB, SMALL_CARD, GpuHost, GpuRun


def assert_capped(run: GpuRun, caps_mib: list[int]) -> None:
    """TensorFlow created one logical GPU per card, each with its cap, and (fake driver) never
    held more than the cap on any card."""
    assert run.exit_code == 0, run.tail()
    got = [(c.logical, c.mb, c.physical) for c in run.created]
    assert got == [(i, cap, i) for i, cap in enumerate(caps_mib)], run.tail()
    for i, cap in enumerate(caps_mib):
        if run.events:
            assert 0 < run.peak_live(i) <= cap * MIB


def test_a_cap_in_mib(gpu_host: GpuHost, image: str, figures: dict[str, Any]) -> None:
    """TF_GPU_MEM_LIMIT=4096: TensorFlow's GPU is created with 4096 MB"""
    run = gpu_host.probe(image, "touch", env={"TF_GPU_MEM_LIMIT": "4096"})
    assert_capped(run, [4096])
    figures.update(created_mb=run.created[0].mb, peak_live_bytes=run.peak_live())


def test_a_percentage_of_the_card(gpu_host: GpuHost, image: str, figures: dict[str, Any]) -> None:
    """TF_GPU_MEM_LIMIT=25%: a quarter of the total NVML reports"""
    run = gpu_host.probe(image, "touch", env={"TF_GPU_MEM_LIMIT": "25%"})
    totals = run.totals
    assert 0 in totals, run.tail()
    if not gpu_host.real:
        assert totals[0] == CARD.memory_mib
    assert_capped(run, [totals[0] * 25 // 100])
    figures.update(card_total_mib=totals[0], created_mb=run.created[0].mb)


def test_one_cap_per_gpu(gpu_host: GpuHost, image: str, figures: dict[str, Any]) -> None:
    """TF_GPU_MEM_LIMIT=4096,2048 on two GPUs: one cap each, in order"""
    run = gpu_host.probe(
        image, "touch", env={"TF_GPU_MEM_LIMIT": "4096,2048"}, cards=(CARD, SMALL_CARD)
    )
    if gpu_host.real and len(run.totals) < 2:
        pytest.skip("this host has one GPU; a list of caps needs two")
    assert_capped(run, [4096, 2048])
    assert len(run.probe["logical_gpus"]) == 2
    figures.update(created=[(c.logical, c.mb, c.physical) for c in run.created])


def test_filling_the_gpu_ends_in_resource_exhausted_at_the_cap(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """Allocating in a loop ends in TensorFlow's ResourceExhaustedError within the cap"""
    cap = 1024
    run = gpu_host.probe(image, "fill", "64", env={"TF_GPU_MEM_LIMIT": str(cap)})
    assert_capped(run, [cap])
    result = run.probe
    assert result["error"] == "ResourceExhaustedError", run.tail()
    assert 0 < result["memory"]["peak"] <= cap * MIB
    # 64 MiB tensors: at least most of the cap was usable before TensorFlow refused
    assert result["tensors"] >= (cap // 64) // 2
    if not gpu_host.real:
        # TensorFlow refused by itself: the card (16 GiB) never ran out
        assert run.refused() == []
        assert run.peak_live() <= cap * MIB
    figures.update(
        cap_mib=cap,
        tensors_of_64_mib=result["tensors"],
        tf_peak_bytes=result["memory"]["peak"],
        driver_peak_live_bytes=run.peak_live(),
    )


def test_the_cap_tests_fail_without_the_hook(gpu_host: GpuHost, runtime_image: str) -> None:
    """TF_GPU_CONFIG=off turns the kit off: the cap assertions above then fail"""
    run = gpu_host.probe(
        runtime_image, "fill", "256", env={"TF_GPU_MEM_LIMIT": "1024", "TF_GPU_CONFIG": "off"}
    )
    assert run.exit_code == 0, run.tail()
    with pytest.raises(AssertionError):
        assert_capped(run, [1024])
    assert run.created and run.created[0].mb > 1024
    assert run.probe["memory"]["peak"] > 1024 * MIB

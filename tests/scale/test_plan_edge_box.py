"""examples/compose.jetson.yaml, the edge box: several models on one 16 GB AGX Xavier,
each capped at 512 MiB with growth on, planned on the Jetson's unified memory. The same services
started on the arm64 stand-in: tests/containers/test_l4t_arm64.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tfgpu.contract.settings import parse_environment

from tests.scale.helpers import errors, plan_json
from tfgpu_kit.matrix import catalog, spec

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "examples" / "compose.jetson.yaml"
TOTAL = 15820  # MemTotal of an AGX Xavier 16 GB, in MiB (the arm64 stand-in's fake Jetson too)
JETSON = ["--gpu-memory", str(TOTAL), "--gpu-count", "1", "--unified-memory"]
CAP_MIB = 512
CONTEXT = 500  # plan's default --context-overhead, per process


def test_the_edge_box_fits_beside_4gib_kept_for_the_system(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = plan_json(capsys, [str(COMPOSE_FILE)], *JETSON, "--reserve", "4GiB")
    assert code == 0, errors(report)
    [budget] = report["gpus"]
    assert budget["memory_mib"] == TOTAL - 4096
    assert budget["committed_mib"] == 3 * (CAP_MIB + CONTEXT)


def test_the_edge_box_does_not_fit_when_the_system_keeps_13gib(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """15820 - 13312 = 2508 MiB left: three models of 512 MiB and a CUDA context each need 3036."""
    code, report = plan_json(capsys, [str(COMPOSE_FILE)], *JETSON, "--reserve", "13GiB")
    assert code == 1 and errors(report), report


def test_every_model_is_the_kits_jetson_image_capped_at_512mib_with_growth() -> None:
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    image = catalog.jetson_images(spec.load())[0]
    assert len(services) >= 3
    for name, service in services.items():
        assert service["image"] == image.tags()[0], name
        assert service["platform"] == "linux/arm64" and service["runtime"] == "nvidia", name
        settings = parse_environment(service["environment"])  # what the runtime would accept
        assert service["environment"]["TF_GPU_MEM_LIMIT"] == f"{CAP_MIB}MiB", name
        assert settings.growth is True, name
        assert service["command"][0] == "python3", name  # the L4T image has no `python`

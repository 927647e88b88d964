"""Every GPU generation told the truth on the build side: `./kit check --gpu-arch` (table and
--json), images/gpus.yaml's validation, the README's generated GPU table, and what every rendered
Dockerfile tells the runtime (TFGPU_IMAGE_GPU_*, the kernel cache). The same rule in the image:
tests/runtime/test_gpu_support.py (stand-in NVML), tests/gpu/test_gpu_generations.py (fake
driver)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tfgpu.contract import gpu_support

from tfgpu_kit import cli
from tfgpu_kit.image import render
from tfgpu_kit.matrix import catalog, compat, matrix_table, spec
from tfgpu_kit.matrix.versions import Arch, parse_driver
from tfgpu_kit.shared.errors import SpecError

SPEC = spec.load()
ROOT = spec.ROOT
FAILING_ON_SM120 = ["2.20.0", "2.19.0", "2.18.0", "2.17.0", "2.16.1"]


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["check", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out = check(capsys, *args, "--json")
    doc: dict[str, Any] = json.loads(out)
    return code, doc


def by_version(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["tensorflow"]: row for row in doc["results"]}


def test_sm120_calls_2_16_to_2_20_known_to_fail_with_the_reports(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = check_json(capsys, "--driver", "580.65.06", "--gpu-arch", "sm_120")
    assert code == 1  # some cannot run as built
    rows = by_version(doc)
    assert doc["gpus"] == SPEC.gpus.architectures["12.0"]
    for tf in FAILING_ON_SM120:
        row = rows[tf]
        assert row["verdict"] == "known to fail" and row["runs"] is False
        kernels = row["kernels"]
        assert kernels["status"] == gpu_support.KNOWN_FAILURE
        assert "CUDA_ERROR_INVALID_PTX" in kernels["failure"]["what"]
        assert re.search(r"tensorflow/tensorflow#\d+", kernels["failure"]["why"])
        # the nearest versions that are not known to fail, either side
        assert row["nearest_not_failing"] == {"older": "2.15.0", "newer": "2.21.0"}
    for tf, row in rows.items():  # XLA: no version is clean on sm_120
        assert row["xla"]["status"] in (gpu_support.KNOWN_FAILURE, gpu_support.PTX_JIT), tf
    assert rows["2.21.0"]["runs"] and rows["2.21.0"]["jit"]
    assert rows["2.21.0"]["kernels"]["status"] == gpu_support.PTX_JIT
    assert "#111958" in rows["2.21.0"]["xla"]["failure"]["why"]
    assert doc["ptx_jit"]["kernel_cache"] == {"path": "/var/cache/tfgpu/cuda", "max_bytes": 2**32}


def test_sm120_table_has_two_columns_and_footnotes_with_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = check(capsys, "--driver", "580.65.06", "--gpu-arch", "sm_120")
    assert code == 1
    text = " ".join(re.sub(r"[│┃]", " ", out).split())
    assert "kernels on sm_120" in text and "XLA on sm_120" in text
    assert "KNOWN TO FAIL [" in text and "nearest not known to fail on sm_120" in text
    for issue in ("#101746", "#99592", "#103531", "#90291", "#111958", "#112272"):
        assert issue in text, issue
    assert "runs through PTX JIT: slow first start; XLA known to fail" in text  # 2.21.0
    assert "could take 30 minutes or longer" in text and "CUDA_CACHE_PATH=/var/cache/tfgpu" in text


def test_sm90_names_the_jit_and_the_cache(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = check_json(capsys, "--driver", "580.65.06", "--gpu-arch", "sm_90")
    assert code == 0
    for tf, row in by_version(doc).items():
        assert row["jit"] and row["kernels"]["status"] == gpu_support.PTX_JIT, tf
        assert any("slow first start" in reason for reason in row["reasons"])
    jit = doc["ptx_jit"]
    assert "30 minutes" in jit["warning"]
    assert {r["source"] for r in jit["reports"]} == {
        "emgucv/emgutf#71",
        "tensorflow/tensorflow#22043",
    }


def test_sm52_does_not_run_2_21_and_sm80_runs_it_natively(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, doc = check_json(capsys, "--driver", "580.65.06", "--gpu-arch", "sm_52", "--tf", "2.21")
    [row] = doc["results"]
    assert code == 1 and row["verdict"] == "does not run" and not row["runs"]
    assert row["kernels"]["status"] == gpu_support.NO_KERNELS
    assert row["nearest_not_failing"] == {"older": "2.16.1", "newer": None}
    code, doc = check_json(capsys, "--driver", "580.65.06", "--gpu-arch", "sm_80", "--tf", "2.21")
    [row] = doc["results"]
    assert code == 0 and row["verdict"] == "native" and row["runs"] and not row["jit"]
    assert row["kernels"]["status"] == row["xla"]["status"] == gpu_support.NATIVE
    assert doc["ptx_jit"] is None


DRIVERS = ["470.82.01", "525.60.13", "535.104.05", "545.23.08", "555.42.06", "580.65.06"]
ARCHES = [gpu_support.capability(cc) or (0, 0) for cc in SPEC.gpus.architectures]


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_pair_with_a_known_failure_is_ever_called_runs(driver: str) -> None:
    """The whole version x architecture grid (gpus.yaml's GPUs), at drivers of every branch."""
    for tf in SPEC.matrix.tensorflow:
        for cc in ARCHES:
            result = compat.assess(SPEC, tf, parse_driver(driver), Arch(*cc))
            failing = [f for f in SPEC.gpus.failures(tf) if f.arch == cc and f.part == "kernels"]
            if failing or result.part("kernels") == gpu_support.NO_KERNELS:
                assert not result.verdict.runs, (tf, cc, driver)
                assert result.as_json()["runs"] is False


@settings(max_examples=200, deadline=None)
@given(
    tf=st.sampled_from(sorted(SPEC.matrix.tensorflow)),
    major=st.integers(3, 15),
    minor=st.integers(0, 9),
    driver=st.tuples(st.integers(400, 700), st.integers(0, 200), st.integers(0, 99)),
)
def test_property_known_failures_never_run(
    tf: str, major: int, minor: int, driver: tuple[int, int, int]
) -> None:
    result = compat.assess(SPEC, tf, parse_driver(".".join(map(str, driver))), Arch(major, minor))
    if any(f.arch == (major, minor) and f.part == "kernels" for f in SPEC.gpus.failures(tf)):
        assert not result.verdict.runs
    if result.verdict.runs and result.support is not None:
        assert result.support.kernels_run


def test_the_readme_gpu_table_is_generated_and_fresh() -> None:
    table = matrix_table.gpu_table(SPEC)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"{matrix_table.GPU_TABLE_BEGIN}\n{table}{matrix_table.GPU_TABLE_END}" in readme
    rows = {
        line.split("|")[1].strip(): line
        for line in table.splitlines()
        if line.startswith("| ") and "sm_" in line
    }
    sm120 = next(line for name, line in rows.items() if name.endswith("sm_120"))
    cells = [c.strip() for c in sm120.split("|")[2:-1]]
    versions = sorted(
        SPEC.matrix.tensorflow, key=lambda v: [int(p) for p in v.split(".")], reverse=True
    )
    for tf, text in zip(versions, cells, strict=True):
        assert text.startswith("**fails**") == (tf in FAILING_ON_SM120), (tf, text)
        assert "XLA" in text or not text.startswith("JIT") or tf < "2.16"
    sm80 = next(line for name, line in rows.items() if name.endswith("sm_80"))
    assert [c.strip() for c in sm80.split("|")[2:-1]][:6] == ["native"] * 6  # 2.16-2.21: SASS


def test_readme_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        f"x\n{matrix_table.GPU_TABLE_BEGIN}\nold\n{matrix_table.GPU_TABLE_END}\n", encoding="utf-8"
    )
    assert "stale" in (matrix_table.readme_gpu_table(SPEC, check=True, readme=readme) or "")
    assert matrix_table.readme_gpu_table(SPEC, check=False, readme=readme) is None
    assert matrix_table.readme_gpu_table(SPEC, check=True, readme=readme) is None
    readme.write_text("no markers\n", encoding="utf-8")
    assert "markers are missing" in (
        matrix_table.readme_gpu_table(SPEC, check=True, readme=readme) or ""
    )


@pytest.mark.parametrize("image", catalog.every_image(SPEC), ids=lambda i: i.name)
def test_every_dockerfile_tells_the_runtime_its_gpus_and_keeps_the_kernels(
    image: catalog.Image,
) -> None:
    text = render.dockerfile_path(render.DOCKERFILES_DIR, image).read_text(encoding="utf-8")
    env = dict(re.findall(r'^\s+(TFGPU_IMAGE_GPU_\w+|CUDA_CACHE_\w+)="([^"]*)"', text, re.M))
    cache = SPEC.gpus.kernel_cache
    assert env["CUDA_CACHE_PATH"] == cache.path and env["CUDA_CACHE_MAXSIZE"] == str(
        cache.max_bytes
    )
    assert 'mkdir -p "$CUDA_CACHE_PATH" && chmod 1777 "$CUDA_CACHE_PATH"' in text
    if image.jetson is not None:  # NVIDIA's own wheel: its architectures are not recorded
        assert "TFGPU_IMAGE_GPU_ARCHES" not in env
        return
    build = SPEC.matrix.tensorflow[image.tensorflow]
    assert build.arches is not None
    assert env["TFGPU_IMAGE_GPU_ARCHES"].split() == [*build.arches.sass, *build.arches.ptx]
    parsed = gpu_support.parse_failures(env["TFGPU_IMAGE_GPU_FAILURES"])
    assert parsed == SPEC.gpus.failures(image.tensorflow)


def _gpus_with(tmp_path: Path, change: Any) -> Path:
    for name in ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml"):
        shutil.copy(spec.IMAGES_DIR / name, tmp_path / name)
    data = yaml.safe_load((tmp_path / "gpus.yaml").read_text(encoding="utf-8"))
    change(data)
    (tmp_path / "gpus.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["known_failures"][0]["also"].update({"2.11.0": "x"}),
            "2.11.0 is not in matrix.yaml",
        ),
        (
            lambda d: d["known_failures"][0]["reports"][0].update(tensorflow=["2.9.3"]),
            "2.9.3 is no release of a TensorFlow minor of matrix.yaml",
        ),
        (lambda d: d["known_failures"][0].update(what='fails " $X'), "without a quote, $"),
        (lambda d: d["known_failures"][0].update(what="a | b"), "or |"),
        (lambda d: d["known_failures"][0].update(part="cudnn"), "expected kernels or xla"),
        (lambda d: d["known_failures"][0].update(arch="sm_120"), "a compute capability X.Y"),
        (lambda d: d["known_failures"][0].update(reports=[], also={}), "needs reports or `also`"),
        (
            lambda d: d["known_failures"][0]["reports"][0].update(source="#101746"),
            "owner/repo#N",
        ),
        (lambda d: d["kernel_cache"].update(max_bytes=2**33), "less than or equal to 4294967296"),
        (lambda d: d.pop("ptx_jit"), "ptx_jit: required key is missing"),
    ],
)
def test_gpus_yaml_is_validated(tmp_path: Path, change: Any, message: str) -> None:
    with pytest.raises(SpecError) as info:
        spec.load(_gpus_with(tmp_path, change))
    assert "gpus.yaml" in str(info.value) and message in str(info.value), str(info.value)

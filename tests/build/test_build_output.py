"""What `build` prints, without an engine: the streamed `Step` lines (docker_engine._follow on
synthetic chunks) and the final table / --json rows / size budget (pure functions)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tfgpu_kit.image import build, build_args, buildkit, docker_engine
from tfgpu_kit.matrix import catalog, spec
from tfgpu_kit.shared.errors import EXIT_FAILED, DockerError

SPEC = spec.load()
BY_NAME = {image.name: image for image in catalog.images(SPEC)}
MIB = 1024 * 1024

CHUNKS = [
    {"stream": "Step 1/3 : FROM tfgpu-standin.local/tensorflow/tensorflow:2.21.0-gpu\n"},
    {"stream": " ---> 1a2b3c\n"},
    {"stream": "Step 2/3 : COPY wheels/ /tmp/tfgpu-wheels/\n\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": "Step 3/3 : RUN tfgpu --help > /dev/null\n ---> Running in 9f\n"},
    {"stream": "pip output line\n"},
    {"aux": {"ID": "sha256:feedbeef"}},
    {"stream": "Successfully built feedbeef\n"},
]


def test_follow_streams_each_step_to_stderr(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # stderr holds only what _follow prints itself (the debug lines go to caplog alone): no
    # earlier in-process cli.main's handler is left on the root logger (tests/conftest.py)
    with caplog.at_level(logging.DEBUG, logger="tfgpu_kit.image.docker_engine"):
        image_id = docker_engine._follow(iter(CHUNKS), "2.21.0-gpu")
    assert image_id == "sha256:feedbeef"
    captured = capsys.readouterr()
    assert captured.out == ""  # progress is never data
    steps = [line for line in captured.err.splitlines() if line.strip()]
    assert steps == [
        "2.21.0-gpu Step 1/3 : FROM tfgpu-standin.local/tensorflow/tensorflow:2.21.0-gpu",
        "2.21.0-gpu Step 2/3 : COPY wheels/ /tmp/tfgpu-wheels/",
        "2.21.0-gpu Step 3/3 : RUN tfgpu --help > /dev/null",
    ]
    # every other line only at debug level (-v)
    assert "2.21.0-gpu   pip output line" in caplog.messages


def test_follow_failure_carries_the_failing_steps_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    chunks = [
        *CHUNKS[:6],
        {"stream": "ERROR: No matching distribution found for rich\n"},
        {"errorDetail": {"message": "The command returned a non-zero code: 1"}},
    ]
    with pytest.raises(DockerError) as info:
        docker_engine._follow(iter(chunks), "2.21.0-gpu")
    message = str(info.value)
    assert "building 2.21.0-gpu failed at Step 3/3 : RUN tfgpu --help" in message
    assert "    pip output line\n    ERROR: No matching distribution found for rich" in message
    assert "Step 1/3" not in message.split("\n", 1)[1]  # only the failing step's output
    assert "error: The command returned a non-zero code: 1" in message
    # the steps before the failure were streamed as they came
    assert "2.21.0-gpu Step 3/3" in capsys.readouterr().err


def test_a_full_disk_gets_the_disks_hint() -> None:
    """The legacy builder's words for ENOSPC in a COPY (as the engine reports it)."""
    chunks = [
        *CHUNKS[:6],
        {"errorDetail": {"message": "failed to copy files: write /var/lib/docker/overlay2/x/merged"
                         "/tmp/w.whl: no space left on device"}},
    ]  # fmt: skip
    with pytest.raises(DockerError) as info:
        docker_engine._follow(iter(chunks), "2.21.0-gpu")
    assert f"hint: {buildkit.DISK_HINT}" in str(info.value)
    assert docker_engine.BASE_HINT not in str(info.value)


def test_follow_without_image_id() -> None:
    with pytest.raises(DockerError, match="the engine reported no image id"):
        docker_engine._follow(iter(CHUNKS[:6]), "x")


def built(
    name: str,
    *,
    size_mib: float,
    added_mib: float | None,
    seconds: float,
    cuda_wheels_mib: float = 0.0,
) -> build.Built:
    image = BY_NAME[name]
    return build.Built(
        image=image,
        image_id="sha256:" + "ab" * 32,
        tags=image.tags(python="3.11"),
        size=int(size_mib * MIB),
        added=None if added_mib is None else int(added_mib * MIB),
        seconds=seconds,
        cuda_wheels_mib=cuda_wheels_mib,
    )


# 2.21.0's base lacks CUDA 12.5 and cuDNN 9: its image adds NVIDIA's wheels; 2.17.0's does not
RESULTS = [
    built("2.21.0-gpu", size_mib=7000.04, added_mib=2855.0, seconds=12.34, cuda_wheels_mib=2854.2),
    built("2.17.0-gpu-jupyter", size_mib=7500, added_mib=None, seconds=3.0),
]


def test_table_rows() -> None:
    rows = build.table_rows(RESULTS)
    assert all(len(row) == len(build.TABLE_COLUMNS) for row in rows)
    cells = [dict(zip(build.TABLE_COLUMNS, row, strict=True)) for row in rows]
    assert cells[0] == {
        "image": "2.21.0-gpu",
        "tags": "tfgpu/tensorflow:2.21.0-gpu\ntfgpu/tensorflow:2.21-gpu\n"
        "tfgpu/tensorflow:latest-gpu\ntfgpu/tensorflow:2.21.0-gpu-py311-cu125",
        "CUDA": "wheels: CUDA 12.5.1, cuDNN 9.3.0 (2854 MiB)",
        "size": "7000.0 MiB",
        "added to base": "2855.00 MiB",
        "budget": "2857.20 MiB",  # 3 MiB for the kit + the wheels' unpacked size
        "duration": "12.3 s",
    }
    assert cells[1]["CUDA"] == "base: CUDA 12.3.1, cuDNN 8.9.6"
    assert cells[1]["tags"].endswith("tfgpu/tensorflow:2.17.0-gpu-jupyter-py311-cu123")
    assert cells[1]["added to base"] == "?"  # the base was not there to compare with
    assert cells[1]["budget"] == "3.00 MiB"


def test_json_rows() -> None:
    rows = build.json_rows(RESULTS)
    assert rows[0] == {
        "image": "2.21.0-gpu",
        "id": "sha256:" + "ab" * 32,
        "tags": RESULTS[0].tags,
        "cuda_source": "wheels",
        "cuda": "12.5.1",
        "cudnn": "9.3.0",
        "cuda_wheels": list(BY_NAME["2.21.0-gpu"].gap.wheels),
        "cuda_wheels_mib": 2854.2,
        "tf_keras_mib": 0.0,  # these Built records give none: the build fills them from the context
        "tensorflow_mib": 0.0,
        "size_mib": 7000.0,
        "added_mib": 2855.0,
        "budget_mib": 2857.2,
        "seconds": 12.3,
    }
    assert rows[1]["added_mib"] is None and rows[1]["cuda_wheels"] == []
    json.dumps(rows)  # serialisable as printed


def test_report_prints_and_checks_the_size_budget(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # max_added_mib is 3 for both variants in images.yaml; the wheels' size comes on top
    assert build.over_budget(RESULTS) == []
    assert build.report(RESULTS, as_json=False) == 0
    out = capsys.readouterr().out
    assert "built" in out and "2855.00 MiB" in out and "2.17.0-gpu-jupyter" in out
    heavy = [
        built("2.16.1-gpu", size_mib=7000, added_mib=3.5, seconds=1.0),
        built("2.20.0-gpu", size_mib=7000, added_mib=2707, seconds=1.0, cuda_wheels_mib=2703.3),
        *RESULTS,
    ]
    assert build.over_budget(heavy) == [
        "2.16.1-gpu adds 3.50 MiB to its base (budget 3.00 MiB)",
        "2.20.0-gpu adds 2707.00 MiB to its base (budget 2706.30 MiB = 3 MiB for the kit"
        " + 2703.30 MiB of NVIDIA wheels)",
    ]
    assert build.report(heavy, as_json=True) == EXIT_FAILED
    captured = capsys.readouterr()
    assert [r["image"] for r in json.loads(captured.out)] == [
        "2.16.1-gpu",
        "2.20.0-gpu",
        "2.21.0-gpu",
        "2.17.0-gpu-jupyter",
    ]
    assert "size budget exceeded: 2.16.1-gpu adds 3.50 MiB to its base (budget 3.00 MiB)" in (
        caplog.messages
    )


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("https://github.com/acme/tfgpu.git", "https://github.com/acme/tfgpu"),
        ("https://gitlab.example.com/ml/tfgpu", "https://gitlab.example.com/ml/tfgpu"),
        ("git@github.com:acme/tfgpu.git", "https://github.com/acme/tfgpu"),
        ("ssh://git@github.com/acme/tfgpu.git", "https://github.com/acme/tfgpu"),
        ("/home/dev/tfgpu", None),  # a clone of a local checkout: not a source anyone can open
        ("../tfgpu", None),
        ("file:///srv/git/tfgpu", None),
        (None, None),
    ],
)
def test_source_label_is_a_url_or_unknown(remote: str | None, url: str | None) -> None:
    assert build_args.source_url(remote) == url


def test_buildargs_never_label_a_local_path(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {("rev-parse", "HEAD"): "c0ffee", ("remote", "get-url", "origin"): "/home/dev/tfgpu"}
    monkeypatch.setattr(build_args, "_git", lambda *command: answers.get(command))
    args = build_args.buildargs(base_digest=None)
    assert args["TFGPU_SOURCE"] == "unknown" and args["TFGPU_REVISION"] == "c0ffee"


class _RecordingApi:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def build(self, **kwargs: object) -> object:
        self.calls.append(kwargs)
        return iter(CHUNKS)


class _RecordingClient:
    def __init__(self) -> None:
        self.api = _RecordingApi()


def test_build_passes_a_platform_only_when_asked(tmp_path: Path) -> None:
    # the L4T images build for linux/arm64 through the same docker_engine.build as every image
    client = _RecordingClient()
    args = {"label": "x", "tag": "t:1", "buildargs": {}, "no_cache": False}
    assert docker_engine.build(client, tmp_path, **args) == "sha256:feedbeef"  # type: ignore[arg-type]
    assert docker_engine.build(client, tmp_path, platform="linux/arm64", **args)  # type: ignore[arg-type]
    native, arm64 = client.api.calls
    assert "platform" not in native and native["pull"] is False
    assert arm64["platform"] == "linux/arm64" and arm64["pull"] is False

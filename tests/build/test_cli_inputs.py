"""Odd inputs to `render`, `bake`, `check`, `build --dry-run` and `lock --check`: each
odd input refused with one message naming the flag (exit 2), an unreadable folder named
(exit 5), and no verdict that says more than was checked."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tfgpu_kit import cli
from tfgpu_kit.image import lock_refresh
from tfgpu_kit.matrix import spec as specs


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(args))
    except SystemExit as exit_info:  # argparse's own refusals
        code = int(exit_info.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # Path("") is ".": render wrote 21 folders into the checkout, bake said "Is a directory"
        (["render", "--out="], 2, "--out is empty"),
        (["render", "--check", "--out="], 2, "--out is empty"),
        (["bake", "--out="], 2, "--out is empty"),
        (["bake", "--contexts="], 2, "--contexts is empty"),
        (["build", "--dry-run", "--contexts="], 2, "--contexts is empty"),
        # not 21 "missing" files: the folder itself is missing
        (["render", "--check", "--out", "/nonexistent-tfgpu"], 5, "no such directory"),
        (["check", "--driver", "535.104.05", "--tf", "2"], 2, "--tf '2' is ambiguous"),
        # ASCII digits only, as the runtime (int("٥٣٥") is 535 in Python, not in nvidia-smi)
        (["check", "--driver", "٥٣٥.104.05"], 2, "'٥٣٥.104.05' is not a driver version"),
        (["check", "--driver", "5³5.104.05"], 2, "is not a driver version"),
        (["check", "--driver", "535.104.05\n1"], 2, "is not a driver version"),
        (
            ["check", "--driver", "535.104.05", "--gpu-arch", "sm_٩٠"],
            2,
            "'sm_٩٠' is not a GPU architecture",
        ),
        (["check", "--driver", "535.104.05", "--gpu-arch", "sm_90\nx"], 2, "not a GPU arch"),
        # a TCP port is 1-65535: the reference grammar's [0-9]+ is not enough for a tag or a push
        (["build", "--dry-run", "--registry", "reg.example:99999"], 2, "(port 99999)"),
        (["build", "--dry-run", "--registry", "reg.example:0"], 2, "(port 0)"),
        (["build", "--dry-run", "--base-registry", "mirror:70000/x"], 2, "(port 70000)"),
        (["bake", "--registry", "reg.example:65536"], 2, "(port 65536)"),
    ],
)
def test_refused(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    got, out, err = _main(capsys, *args)
    assert got == code, err
    assert message in err
    assert out == ""


def test_render_into_the_checkout_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(specs.ROOT)
    before = sorted(path.name for path in specs.ROOT.iterdir())
    code, _, err = _main(capsys, "render", "--out", ".")
    assert code == 2 and "is the checkout itself" in err
    assert sorted(path.name for path in specs.ROOT.iterdir()) == before


def test_bake_out_a_folder_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _main(capsys, "bake", "--out", str(tmp_path))
    assert code == 2 and "is a folder: accepted: a file path" in err


def test_check_minor_still_answers_with_its_newest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "check", "--driver", "560.35.03", "--tf", "2.21", "--json")
    assert code == 0 and '"tensorflow": "2.21.0"' in out


def test_registry_ports_in_range_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(
        capsys, "build", "--dry-run", "--json", "--registry", "reg.example:65535/team"
    )
    assert code == 0, err
    assert "reg.example:65535/team/" in out


def test_lock_check_says_what_is_complete_and_what_is_unknown(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = lock_refresh.Completeness([], 20)
    monkeypatch.setattr(lock_refresh, "completeness", lambda spec: found)
    with caplog.at_level(logging.INFO):
        # unknown digests warn; exit 0 (README, --help)
        assert lock_refresh.check(specs.load()) == 0
    text = caplog.text
    assert "20 base digests unknown" in text
    assert "locks complete: CUDA wheels, image wheels; bases: every base has an entry, 20 with" in (
        text
    )
    assert "locks complete: CUDA wheels, image wheels, bases" not in text


def test_lock_check_all_known(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock_refresh, "completeness", lambda spec: lock_refresh.Completeness([], 0))
    with caplog.at_level(logging.INFO):
        assert lock_refresh.check(specs.load()) == 0
    assert "bases (every digest known)" in caplog.text
    assert "unknown" not in caplog.text


def test_lock_check_missing_entry_fails(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = lock_refresh.Completeness(["bases.lock.yaml: x has no entry"], 0)
    monkeypatch.setattr(lock_refresh, "completeness", lambda spec: missing)
    assert lock_refresh.check(specs.load()) == 1
    assert "locks complete" not in caplog.text


def test_a_number_too_long_for_python_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """int() refuses more than 4300 digits with a ValueError: the flag's message instead, with
    the value cut short."""
    assert cli.main(["k8s", "--image", "r.example/t:1", "--replicas", "9" * 5000]) == 2
    err = capsys.readouterr().err
    assert "--replicas '9999" in err and "is not valid" in err and "Traceback" not in err
    assert len(err) < 600


def test_an_unwritable_output_name_is_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no\nsuch" / "rules.yaml"
    compose = str(specs.ROOT / "compose.yaml")
    code = cli.main(["plan", compose, "--gpu-memory", "16GiB", "--prometheus-rules", str(target)])
    err = capsys.readouterr().err
    assert code == 5 and "no\\nsuch" in err and "no\nsuch" not in err, err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["sbom", "bad::ref"], 2, "IMAGE 'bad::ref' is not valid"),
        (["sbom", "tfgpu/TensorFlow:1"], 2, "lower-case path"),
        (["sbom", "tfgpu/x:1", "--out="], 2, "--out is empty"),
        (
            ["sbom", "tfgpu/x:1", "--out", "/nonexistent-tfgpu/sbom.json"],
            5,
            "folder does not exist",
        ),
        (["sbom", "tfgpu/x:1", "--out", "/"], 5, "is a folder"),
    ],
)
def test_sbom_checks_its_arguments_before_it_asks_an_engine(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    message: str,
) -> None:
    """Before: every mistake answered "no Docker engine answers" where none ran, and a bad --out
    was found only after the image was read."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent-tfgpu.sock")
    got, _, err = _main(capsys, *args)
    assert (got, message in err) == (code, True), err
    assert "Docker engine" not in err

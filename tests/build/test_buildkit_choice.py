"""Which builder `build.py build` uses (tfgpu_kit.image.buildkit), with stand-ins of the Docker CLI.

The stand-ins answer `--version` and `buildx version` with the real CLIs' words, as read on the
machines the kit runs on: Debian's docker.io 20.10 (BuildKit built in; `docker: 'buildx' is not a
docker command.`), Docker 28 without the plugin (`docker: unknown command: docker buildx`), and a
CLI with buildx (`github.com/docker/buildx v0.12.1 30feaa1`, the line buildx's `version` command
prints: docker/buildx commands/version.go). A real build through BuildKit and its comparison with
the legacy builder's: tests/containers/test_buildkit.py."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tfgpu_kit.image import buildkit
from tfgpu_kit.shared.errors import DockerError, UsageError

ROOT = Path(__file__).resolve().parents[2]

DEBIAN_20 = (
    "Docker version 20.10.24+dfsg1, build 297e128",
    "docker: 'buildx' is not a docker command.",
)
DOCKER_28 = ("Docker version 28.2.2, build e6534b4", "docker: unknown command: docker buildx")
WITH_BUILDX = ("Docker version 28.2.2, build e6534b4", None)


def fake_cli(tmp_path: Path, said: tuple[str, str | None], build: str = "") -> Path:
    """A `docker` that answers --version and buildx version as `said`; its `build` runs `build`
    (shell) with the arguments in "$@", after writing them to argv.txt."""
    version, no_buildx = said
    buildx = (
        f'echo "{no_buildx}" >&2; exit 1'
        if no_buildx
        else 'echo "github.com/docker/buildx v0.12.1 30feaa1"'
    )
    cli = tmp_path / "docker"
    cli.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo "{version}"; exit 0; fi\n'
        f'if [ "$1 $2" = "buildx version" ]; then {buildx}; fi\n'
        f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\n'
        f'echo "DOCKER_BUILDKIT=$DOCKER_BUILDKIT" >> "{tmp_path}/argv.txt"\n'
        f"{build}\n",
        encoding="utf-8",
    )
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    return cli


def test_a_cli_before_docker_23_has_buildkit_built_in(tmp_path: Path) -> None:
    found = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20)))
    assert (found.kind, found.buildx) == ("buildkit", False)
    assert "20.10.24+dfsg1" in found.why


def test_a_cli_with_buildx_builds_through_it(tmp_path: Path) -> None:
    found = buildkit.find_buildkit(str(fake_cli(tmp_path, WITH_BUILDX)))
    assert (found.kind, found.buildx) == ("buildkit", True)
    assert "buildx v0.12.1" in found.why


def test_docker_28_without_buildx_falls_back_and_says_why(tmp_path: Path) -> None:
    cli = str(fake_cli(tmp_path, DOCKER_28))
    found = buildkit.choose("auto", cli)
    assert found.kind == "legacy" and found.cli is None
    assert "28.2.2 without the buildx plugin" in found.why and "docker-buildx" in found.why


def test_buildkit_asked_for_where_there_is_none_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        buildkit.choose("buildkit", str(fake_cli(tmp_path, DOCKER_28)))
    assert "--builder buildkit" in str(refused.value) and "--builder legacy" in str(refused.value)


def test_legacy_asked_for_probes_nothing(tmp_path: Path) -> None:
    assert buildkit.choose("legacy", str(tmp_path / "no-such-docker")).kind == "legacy"


def test_no_cli_at_all_is_the_legacy_builder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    found = buildkit.choose("auto")
    assert found.kind == "legacy" and "no `docker` CLI on PATH" in found.why


def test_an_unknown_builder_is_refused_with_the_choices() -> None:
    with pytest.raises(UsageError, match="accepted are auto, buildkit, legacy"):
        buildkit.choose("kaniko")


def test_the_build_line_carries_tag_args_file_platform_and_no_cache(tmp_path: Path) -> None:
    builder = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20)))
    line = buildkit.argv(
        builder,
        tmp_path / "ctx",
        tag="r/t:1",
        buildargs={"B": "2", "A": "1"},
        no_cache=True,
        platform="linux/arm64",
        iidfile=tmp_path / "iid",
        progress="plain",
    )
    assert line[1:2] == ["build"] and line[-1] == str(tmp_path / "ctx")
    assert line[line.index("--tag") + 1] == "r/t:1"
    assert line[line.index("--file") + 1] == str(tmp_path / "ctx" / "Dockerfile")
    assert [line[i + 1] for i, a in enumerate(line) if a == "--build-arg"] == ["A=1", "B=2"]
    assert "--no-cache" in line and line[line.index("--platform") + 1] == "linux/arm64"
    buildx = buildkit.find_buildkit(str(fake_cli(tmp_path, WITH_BUILDX)))
    assert buildkit.argv(
        buildx, tmp_path, tag="t", buildargs={}, no_cache=False, platform=None,
        iidfile=tmp_path / "iid", progress="plain",
    )[1:4] == ["buildx", "build", "--load"]  # fmt: skip


def test_a_build_returns_the_id_buildkit_wrote(tmp_path: Path) -> None:
    iid = "sha256:" + "ab" * 32
    write = f'while [ "$1" != "--iidfile" ]; do shift; done; echo "{iid}" > "$2"; echo "#1 DONE"'
    builder = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20, write)))
    got = buildkit.build(builder, tmp_path, label="x", tag="t", buildargs={}, no_cache=False)
    assert got == iid
    assert "DOCKER_BUILDKIT=1" in (tmp_path / "argv.txt").read_text()


def test_a_failed_step_is_a_docker_error_with_its_output(tmp_path: Path) -> None:
    # BuildKit's own words for a failing RUN (plain progress, as read from Docker 20.10)
    fail = (
        'echo "#5 0.759 failing"; '
        'echo "#5 ERROR: executor failed running [/bin/sh -c exit 3]: exit code: 3"; exit 1'
    )
    builder = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20, fail)))
    with pytest.raises(DockerError) as failed:
        buildkit.build(builder, tmp_path, label="2.21.0-gpu", tag="t", buildargs={},
                       no_cache=False, hint="the base hint")  # fmt: skip
    message = str(failed.value)
    assert "building 2.21.0-gpu failed (BuildKit" in message and "exit code: 3" in message
    assert "the base hint" not in message  # a failing RUN is not a missing base


def test_a_base_that_cannot_be_had_gets_the_base_hint(tmp_path: Path) -> None:
    fail = (
        'echo " > [internal] load metadata for nosuch.local/x:1:"; '
        'echo "failed to solve with frontend dockerfile.v0: no such host"; exit 1'
    )
    builder = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20, fail)))
    with pytest.raises(DockerError) as failed:
        buildkit.build(builder, tmp_path, label="x", tag="t", buildargs={}, no_cache=False,
                       hint="the base hint")  # fmt: skip
    assert "hint: the base hint" in str(failed.value)


def test_a_failed_step_after_the_metadata_load_is_not_a_missing_base(tmp_path: Path) -> None:
    """Every BuildKit build prints "load metadata for" its base; a later step that fails (here the
    engine's disk is full, BuildKit's words as read from Docker 20.10) gets the disk's hint."""
    fail = (
        'echo "#3 [internal] load metadata for tfgpu-standin.local/t/t:2.15.0-gpu"; '
        'echo "#3 DONE 0.0s"; '
        'echo "#6 ERROR: failed to copy files: userspace copy failed: write /var/lib/docker/x:'
        ' no space left on device"; '
        'echo " > [tfgpu-runtime 2/3] COPY wheels/ /tmp/tfgpu-wheels/:"; exit 1'
    )
    builder = buildkit.find_buildkit(str(fake_cli(tmp_path, DEBIAN_20, fail)))
    with pytest.raises(DockerError) as failed:
        buildkit.build(builder, tmp_path, label="x", tag="t", buildargs={}, no_cache=False,
                       hint="the base hint")  # fmt: skip
    message = str(failed.value)
    assert "the base hint" not in message
    assert f"hint: {buildkit.DISK_HINT}" in message


def test_build_help_names_the_builders() -> None:
    out = subprocess.run(
        [sys.executable, "build.py", "build", "--help"], cwd=ROOT, capture_output=True,
        text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0 and "--builder" in out.stdout and "BuildKit" in out.stdout


def test_a_bad_builder_flag_is_refused_before_anything_is_built() -> None:
    out = subprocess.run(
        [sys.executable, "build.py", "build", "--builder", "kaniko", "--dry-run"], cwd=ROOT,
        capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=120,
        check=False,
    )  # fmt: skip
    assert out.returncode == 2 and "--builder" in out.stderr and "'kaniko'" in out.stderr
    assert "Traceback" not in out.stderr

"""`build.py plan` on compose files: table-driven cases (the caps are resolved by the
runtime's own parsers, so these also pin that plan and runtime agree)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scale.helpers import errors, plan_json, write

ROOT = Path(__file__).resolve().parents[2]


def gpu(*ids: str, count: object = None) -> dict[str, Any]:
    device: dict[str, Any] = {"driver": "nvidia", "capabilities": ["gpu"]}
    if ids:
        device["device_ids"] = list(ids)
    if count is not None:
        device["count"] = count
    return {"resources": {"reservations": {"devices": [device]}}}


def service(
    env: dict[str, Any] | list[str] | None = None,
    deploy: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"image": "tfgpu/tensorflow:2.21.0-gpu", **extra}
    if env is not None:
        out["environment"] = env
    if deploy is not None:
        out["deploy"] = deploy
    return out


# (id, services, extra flags, ok, substrings each expected in some error, committed MiB on GPU 0)
CASES: list[tuple[str, dict[str, Any], list[str], bool, list[str], float | None]] = [
    (
        "seed scenario fits",
        {
            "text": service({"TF_GPU_MEM_LIMIT": 6144}, gpu("0")),
            "image": service({"TF_GPU_MEM_LIMIT": "8GiB"}, gpu("0")),
        },
        [],
        True,
        [],
        6144 + 8192 + 2 * 500,
    ),
    (
        "over-committed",
        {
            "text": service({"TF_GPU_MEM_LIMIT": "8GiB"}, gpu("0")),
            "image": service({"TF_GPU_MEM_LIMIT": "8GiB"}, gpu("0")),
        },
        [],
        False,
        ["GPU 0 is over-committed: 17384 MiB of 16384", "lower the caps by 1000 MiB"],
        17384,
    ),
    (
        "missing cap on a shared GPU names the service and a value",
        {
            "text": service({"TF_GPU_MEM_LIMIT": 6144}, gpu("0")),
            "notebook": service({"TF_GPU_MEMORY_GROWTH": True}, gpu("0")),
        },
        [],
        False,
        [
            "notebook: has no memory cap on GPU 0",
            "TF_GPU_MEMORY_GROWTH alone is not a cap",
            "services.notebook.environment, e.g. TF_GPU_MEM_LIMIT=9216",
        ],
        None,
    ),
    (
        "one uncapped process alone on its GPU is fine",
        {
            "train": service({}, gpu("1")),
            "text": service({"TF_GPU_MEM_LIMIT": 6144}, gpu("0")),
        },
        [],
        True,
        [],
        6644,
    ),
    (
        "percentages resolve against the card",
        {
            "a": service(["TF_GPU_MEM_LIMIT=50%"], gpu("0")),
            "b": service(["TF_GPU_MEM_LIMIT=40%"], gpu("0")),
        },
        [],
        True,
        [],
        8192 + 6553 + 1000,
    ),
    (
        "percentages over the card with contexts",
        {
            "a": service(["TF_GPU_MEM_LIMIT=50%"], gpu("0")),
            "b": service(["TF_GPU_MEM_LIMIT=50%"], gpu("0")),
        },
        [],
        False,
        ["over-committed"],
        16384 + 1000,
    ),
    (
        "replicas multiply",
        {
            "text": service({"TF_GPU_MEM_LIMIT": 4096}, {**gpu("0"), "replicas": 3}),
        },
        [],
        True,
        [],
        3 * 4596,
    ),
    (
        "replicas over-commit",
        {
            "text": service({"TF_GPU_MEM_LIMIT": 4096}, {**gpu("0"), "replicas": 4}),
        },
        [],
        False,
        ["over-committed: 18384 MiB"],
        4 * 4596,
    ),
    (
        "processes label counts CUDA contexts",
        {
            "api": service(
                {"TF_GPU_MEM_LIMIT": 3072}, gpu("0"), labels={"io.tfgpu.processes": "4"}
            ),
        },
        [],
        True,
        [],
        4 * 3572,
    ),
    (
        "virtual devices sum on their card",
        {
            "split": service({"TF_GPU_VIRTUAL_DEVICES": "6144,8192"}, gpu("0")),
            "other": service({"TF_GPU_MEM_LIMIT": 1024}, gpu("0")),
        },
        [],
        True,
        [],
        6144 + 8192 + 1024 + 1000,
    ),
    (
        "per-GPU caps follow count: 2 onto GPUs 0 and 1",
        {
            "wide": service({"TF_GPU_MEM_LIMIT": "10240,2048"}, gpu(count=2)),
            "small": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0")),
        },
        [],
        True,
        [],
        10240 + 4096 + 1000,
    ),
    (
        "CUDA_VISIBLE_DEVICES picks inside the container",
        {
            "wide": service(
                {"TF_GPU_MEM_LIMIT": 12288, "CUDA_VISIBLE_DEVICES": "1"}, gpu("0", "1")
            ),
            "small": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0")),
        },
        [],
        True,
        [],
        12288 + 500,
    ),
    (
        "NVIDIA_VISIBLE_DEVICES without a device request",
        {
            "a": service(
                {"TF_GPU_MEM_LIMIT": 12288, "NVIDIA_VISIBLE_DEVICES": "0"}, runtime="nvidia"
            ),
            "b": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0")),
        },
        [],
        False,
        ["over-committed"],
        12288 + 4096 + 1000,
    ),
    (
        "count: all needs the host's GPU count",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu(count="all")),
        },
        [],
        False,
        ["needs the number of GPUs on the host: pass --gpu-count"],
        None,
    ),
    (
        "count: all with --gpu-count",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu(count="all")),
            "b": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("1")),
        },
        ["--gpu-count", "2"],
        True,
        [],
        4596,
    ),
    (
        "interpolated cap is reported, not guessed",
        {
            "a": service({"TF_GPU_MEM_LIMIT": "${TEXT_CAP:-6144}"}, gpu("0")),
        },
        [],
        False,
        ["its cap is unknown: TF_GPU_MEM_LIMIT", "interpolated from the shell"],
        None,
    ),
    (
        "env_file without a cap in environment",
        {
            "a": service(None, gpu("0"), env_file=".env"),
        },
        [],
        False,
        ["env_file", "not read"],
        None,
    ),
    (
        "env_file is irrelevant when environment sets the cap",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0"), env_file=".env"),
        },
        [],
        True,
        [],
        4596,
    ),
    (
        "an interpolated unrelated variable does not matter",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 4096, "JUPYTER_TOKEN": "${TOKEN}"}, gpu("0")),
        },
        [],
        True,
        [],
        4596,
    ),
    (
        "a value the runtime refuses is an error here too",
        {
            "a": service({"TF_GPU_MEM_LIMIT": "4GB"}, gpu("0")),
        },
        [],
        False,
        ["TF_GPU_MEM_LIMIT='4GB' is not valid", "exit 78"],
        None,
    ),
    (
        "TF_GPU_CONFIG=off leaves the process uncapped",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 4096, "TF_GPU_CONFIG": "off"}, gpu("0")),
            "b": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0")),
        },
        [],
        False,
        ["a: has no memory cap on GPU 0"],
        None,
    ),
    (
        "services without GPUs are ignored",
        {
            "db": {"image": "postgres"},
            "a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0")),
        },
        [],
        True,
        [],
        4596,
    ),
    (
        "profiles are skipped unless asked for",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0")),
            "extra": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0"), profiles=["debug"]),
        },
        [],
        True,
        [],
        12788,
    ),
    (
        "--profile includes them",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0")),
            "extra": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0"), profiles=["debug"]),
        },
        ["--profile", "debug"],
        False,
        ["over-committed"],
        None,
    ),
    (
        "a profile given as a string is one profile, not its letters",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0")),
            "extra": service({"TF_GPU_MEM_LIMIT": 12288}, gpu("0"), profiles="dev"),
        },
        ["--profile", "dev"],
        False,
        ["over-committed"],
        None,
    ),
    (
        "context overhead is a flag",
        {
            "a": service({"TF_GPU_MEM_LIMIT": 8000}, gpu("0")),
            "b": service({"TF_GPU_MEM_LIMIT": 8000}, gpu("0")),
        },
        ["--context-overhead", "100MiB"],
        True,
        [],
        16200,
    ),
]


@pytest.mark.parametrize(
    ("services", "flags", "ok", "expected", "committed"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_compose_cases(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    services: dict[str, Any],
    flags: list[str],
    ok: bool,
    expected: list[str],
    committed: float | None,
) -> None:
    path = write(tmp_path, "compose.yaml", {"services": services})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", *flags)
    found = errors(report)
    assert report["ok"] is ok, found
    assert code == (0 if ok else 1)
    for text in expected:
        assert any(text in e for e in found), (text, found)
    if committed is not None:
        gpu0 = next(g for g in report["gpus"] if g["gpu"] == "0")
        assert gpu0["committed_mib"] == pytest.approx(committed, abs=1)


def test_table_and_verdict_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tfgpu_kit import cli

    path = write(
        tmp_path,
        "compose.yaml",
        {"services": {"a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0"))}},
    )
    assert cli.main(["plan", path, "--gpu-memory", "16GiB"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0: 16,384 MiB" in out and "headroom 11,788" in out and "plan OK" in out


def test_project_compose_yaml_passes(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's acceptance line: the shipped compose.yaml fits a 16 GiB card."""
    code, report = plan_json(capsys, [str(ROOT / "compose.yaml")], "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert report["gpus"][0]["headroom_mib"] >= 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gpu-memory", "16GB"], "--gpu-memory '16GB' is not a size"),
        (["--gpu-memory", "50%"], "not a single absolute size"),
        (["--gpu-memory", "16GiB", "--context-overhead", "lots"], "--context-overhead 'lots'"),
        (
            ["--gpu-memory", "16GiB", "--gpu-count", "0"],
            "--gpu-count '0' is not valid: accepted: a whole number from 1 to 64",
        ),
        (["--gpu-memory", "16GiB", "--time-slicing", "x"], "--time-slicing 'x'"),
    ],
)
def test_bad_flags_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    from tfgpu_kit import cli

    path = write(tmp_path, "compose.yaml", {"services": {}})
    assert cli.main(["plan", path, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "example:" in err


def test_unreadable_and_foreign_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tfgpu_kit import cli

    # a file that cannot be read is README's exit 5; bad content is a usage error (2)
    assert cli.main(["plan", str(tmp_path / "missing.yaml"), "--gpu-memory", "16GiB"]) == 5
    bad = tmp_path / "bad.yaml"
    bad.write_text("services: [\n", encoding="utf-8")
    assert cli.main(["plan", str(bad), "--gpu-memory", "16GiB"]) == 2
    other = write(tmp_path, "other.yaml", {"hello": "world"})
    assert cli.main(["plan", other, "--gpu-memory", "16GiB"]) == 2
    err = capsys.readouterr().err
    assert "missing.yaml: cannot be read (No such file or directory)" in err
    assert "bad.yaml: line 2, column 1: not valid YAML" in err and "neither a compose file" in err


@pytest.mark.parametrize(
    "doc",
    [
        {"services": {"a": {"deploy": 5, "gpus": "all"}}},
        {"services": {"a": {"deploy": {"resources": {"reservations": {"devices": 3}}}}}},
        {"services": {"a": {"labels": 5, "gpus": "all"}}},
        {"services": {"a": {"gpus": [{"device_ids": 0}]}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": [1]},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": [5]}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": [1]},
    ],
)
def test_wrongly_shaped_files_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object
) -> None:
    from tfgpu_kit import cli

    path = write(tmp_path, "odd.yaml", doc)
    assert cli.main(["plan", path, "--gpu-memory", "16GiB", "--gpu-count", "2"]) == 2
    err = capsys.readouterr().err
    # one line naming the file, the field and what is accepted
    assert err.startswith(f"error: {path}: ") and "accepted: a " in err and "example: " in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_string_profile_is_named_whole_in_the_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = {"extra": service({"TF_GPU_MEM_LIMIT": 1024}, gpu("0"), profiles="dev")}
    path = write(tmp_path, "compose.yaml", {"services": services})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert code == 0
    assert any("only starts with profile(s) dev (pass --profile" in n for n in report["notes"])


def test_the_compose_file_publishes_no_port_beyond_the_host() -> None:
    """TensorFlow's gRPC has no authentication: the stack publishes no training port, and every
    port it publishes binds the host's loopback (a bare "8501:8501" binds every interface)."""
    import yaml
    from tfgpu.contract import tf_config

    stack = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    published = [
        (name, str(port))
        for name, svc in stack["services"].items()
        for port in svc.get("ports", [])
    ]
    assert published, "the stack publishes its model servers and metrics"
    for name, port in published:
        assert port.startswith("127.0.0.1:"), (name, port)
        assert not port.endswith(f":{tf_config.DEFAULT_PORT}"), (name, port)
    for svc in stack["services"].values():
        env = svc.get("environment", {})
        assert not {"TF_CONFIG", "TF_GPU_PS", "TF_GPU_WORKERS"} & set(env), svc


@pytest.mark.parametrize(
    ("env", "says"),
    [
        # the runtime warns about a misspelt name and starts: it never exits 78 for one
        ({"TF_GPU_MEM_LMIT": "4096"}, "as if TF_GPU_MEM_LIMIT were not set: with no cap"),
        (
            {"TF_GPU_MEM_LMIT": "4096", "TF_GPU_MEMORY_GROWTH": "true"},
            "with no cap, it grows on demand up to the whole GPU",
        ),
        (
            {"TF_GPU_MEMORY_GROWHT": "true", "TF_GPU_MEM_LIMIT": "4096"},
            "as if TF_GPU_MEMORY_GROWTH were not set",
        ),
        ({"TF_GPU_MEM_LIMIT": "lots"}, "the container would refuse to start (exit 78)"),
    ],
)
def test_the_fix_says_what_the_container_would_really_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], env: dict[str, str], says: str
) -> None:
    """Before: a misspelt name's fix said "the container would refuse to start (exit 78)", where
    the runtime warns and starts without what the name meant to set."""
    from tfgpu.contract.settings import parse_environment

    path = write(tmp_path, "compose.yaml", {"services": {"a": service(env, gpu("0"))}})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    [problem] = [p for p in report["problems"] if p["severity"] == "error"]
    assert code == 1 and says in problem["fix"], problem["fix"]
    if "exit 78" not in says:  # and the runtime does start: a warning, no refusal
        assert any("is ignored" in w for w in parse_environment(env).warnings)
        assert "exit 78" not in problem["fix"]

"""`build.py plan` reads its input as strictly as Compose, Docker and Kubernetes do: each odd
input as a regression test, with the exit code and one message that names the file, the field,
the value and what is accepted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.scale.helpers import errors, plan_json, write
from tests.scale.test_plan_compose import gpu, service
from tests.scale.test_plan_kube import container, deployment
from tfgpu_kit import cli
from tfgpu_kit.matrix import local_driver

CAP = {"TF_GPU_MEM_LIMIT": 4096}
KUBE_CAP = {"TF_GPU_MEM_LIMIT": "4GiB"}  # env values are strings in Kubernetes


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's GPU count is what --gpu-count says, or unknown: never a real driver's."""
    monkeypatch.setattr(local_driver, "gpu_memory", lambda missing: (None, "no driver (test)"))


def compose_file(tmp_path: Path, services: dict[str, Any], name: str = "compose.yaml") -> str:
    return write(tmp_path, name, {"services": services})


def run_plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys: pytest.CaptureFixture[str], path: str, *flags: str) -> str:
    """The one error line of a file plan refuses (exit 2)."""
    code, out, err = run_plan(capsys, path, "--gpu-memory", "16GiB", *flags)
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "accepted:" in err and "example:" in err and "Traceback" not in err
    return err


# --- counts: bounded by what they mean, never a list per unit ---------------------------------


def test_a_count_over_64_bits_is_refused_as_compose_go_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compose_file(tmp_path, {"a": service(CAP, gpu(count=99999999999999999999))})
    err = refused(capsys, path)
    assert "services.a.deploy.resources.reservations.devices[0].count is a number" in err


@pytest.mark.parametrize("count", [99999999999, 100000])
def test_a_huge_count_is_answered_fast_without_allocating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: int
) -> None:
    path = compose_file(tmp_path, {"a": service(CAP, gpu(count=count))})
    started = time.monotonic()
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert time.monotonic() - started < 5
    assert code == 1
    assert any(
        f"count: {count} asks for more GPUs than plan takes at most 64" in e for e in errors(report)
    )


def test_gpu_count_flag_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = compose_file(tmp_path, {})
    started = time.monotonic()
    code, _, err = run_plan(capsys, path, "--gpu-memory", "16GiB", "--gpu-count", "99999999999")
    assert time.monotonic() - started < 5
    assert code == 2
    assert "--gpu-count '99999999999' is not valid: accepted: a whole number from 1 to 64" in err


@pytest.mark.parametrize("flag", ["--gpu-count", "--time-slicing"])
def test_a_count_flag_of_thousands_of_digits_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """int() refuses more than 4300 digits with a ValueError: the flag is refused before."""
    path = compose_file(tmp_path, {})
    code, _, err = run_plan(capsys, path, "--gpu-memory", "16GiB", flag, "1" * 5000)
    assert code == 2 and f"{flag} '{'1' * 24}…' is not valid: accepted: a whole number" in err
    assert len(err) < 300


def test_more_gpus_than_the_host_has_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compose_file(tmp_path, {"a": service(CAP, gpu(count=4))})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", "--gpu-count", "2")
    assert code == 1 and report["gpus"] == []
    [error] = errors(report)
    assert "count: 4 asks for more GPUs than the host has 2" in error
    assert "the container would not start" in error


def test_a_device_id_the_host_lacks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compose_file(tmp_path, {"a": service(CAP, gpu("3"))})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", "--gpu-count", "2")
    assert code == 1
    assert any("GPU 3 does not exist: the host has 2" in e for e in errors(report))


@pytest.mark.parametrize("count", [-2, -1, "-7"])
def test_a_negative_count_is_every_gpu_as_docker_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: object
) -> None:
    """moby daemon/nvidia_linux.go, setNvidiaGPUs: `req.Count < 0` → NVIDIA_VISIBLE_DEVICES=all."""
    path = compose_file(tmp_path, {"a": service(CAP, gpu(count=count))})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", "--gpu-count", "2")
    assert code == 0, errors(report)
    assert [g["gpu"] for g in report["gpus"]] == ["0", "1"]


def test_a_count_string_is_read_as_compose_go_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compose-go DeviceCount: "all" in any case, or strconv.ParseInt of the string."""
    path = compose_file(
        tmp_path,
        {"a": service(CAP, gpu(count="2")), "b": service(CAP, gpu(count="ALL"))},
    )
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", "--gpu-count", "3")
    assert code == 0, errors(report)
    assert {g["gpu"]: g["processes"] for g in report["gpus"]} == {"0": 2, "1": 2, "2": 1}


@pytest.mark.parametrize(
    ("count", "shown"), [(True, "true"), (1.5, "1.5"), ("two", "'two'"), ([1], "a list")]
)
def test_a_count_of_another_type_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: object, shown: str
) -> None:
    path = compose_file(tmp_path, {"a": service(CAP, gpu(count=count))})
    err = refused(capsys, path, "--gpu-count", "2")
    assert f"count is {shown}: accepted: a whole number of GPUs or 'all'" in err


# --- device ids ------------------------------------------------------------------------------


def test_device_ids_and_count_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compose-go types/device.go: exclusive; moby: "cannot set both Count and DeviceIDs"."""
    path = compose_file(tmp_path, {"a": service(CAP, gpu("0", count=1))})
    err = refused(capsys, path)
    assert "devices[0] has both count and device_ids" in err
    assert "cannot set both Count and DeviceIDs" in err


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ("12", "device_ids is '12': accepted: a list"),
        ({"a": 1}, "device_ids is a mapping: accepted: a list"),
        (["-1"], "device_ids[] is '-1': accepted: a GPU index (0), a GPU UUID"),
        (["a"], "device_ids[] is 'a': accepted: a GPU index"),
        (["0,1"], "device_ids[] is '0,1': accepted: a GPU index"),
        ([0], "device_ids[] is 0: accepted: a string"),
        (["0", "0"], "accepted: each GPU once"),
    ],
)
def test_bad_device_ids_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ids: object, message: str
) -> None:
    request = {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ids}
    doc = {"a": service(CAP, {"resources": {"reservations": {"devices": [request]}}})}
    err = refused(capsys, compose_file(tmp_path, doc))
    assert message in err


def test_a_device_request_without_capabilities_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compose-go: "capabilities" attribute is mandatory for device request definition."""
    request = {"driver": "nvidia", "count": 1}
    doc = {"a": service(CAP, {"resources": {"reservations": {"devices": [request]}}})}
    assert "capabilities is null" in refused(capsys, compose_file(tmp_path, doc))


# --- compose structure -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("services", "message"),
    [
        ({"a": 5}, "services.a is 5: accepted: a mapping (compose-spec"),
        ({"a": None}, "services.a is null: accepted: a mapping"),
        ({"a": [1]}, "services.a is a list: accepted: a mapping"),
        ({"bad name": {}}, "a service name is 'bad name': accepted: letters, digits"),
        ({"a": {"gpus": "some"}}, "services.a.gpus is 'some': accepted: 'all' or a list"),
        ({"a": {"environment": {"X": [1]}}}, "environment.X is a list: accepted: a string"),
        ({"a": {"environment": [5]}}, "environment[] is 5: accepted: a string"),
        ({"a": {"profiles": [{"x": 1}]}}, "profiles[] is a mapping: accepted: a string"),
        ({"a": {"env_file": {"x": 1}}}, "env_file is a mapping: accepted: a list"),
    ],
)
def test_what_compose_refuses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], services: Any, message: str
) -> None:
    assert message in refused(capsys, compose_file(tmp_path, services))


# --- Kubernetes quantities -------------------------------------------------------------------


def pod_with(resources: dict[str, Any]) -> dict[str, Any]:
    tf = container(KUBE_CAP, gpus=None, resources=resources)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [tf]},
    }


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("x", "'x'"),
        ("-1", "'-1'"),
        (-1, "-1"),
        ("1.5", "'1.5'"),
        ("500m", "'500m'"),
        (True, "true"),
        ("1k", "'1k'"),
        (65, "65"),
        ("1e999999999", "'1e999999999'"),
    ],
)
def test_a_gpu_amount_kubernetes_refuses_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], amount: object, shown: str
) -> None:
    """Kubernetes: extended resources must be whole, non-negative quantities."""
    path = write(tmp_path, "pod.yaml", pod_with({"limits": {"nvidia.com/gpu": amount}}))
    started = time.monotonic()
    err = refused(capsys, path)
    assert time.monotonic() - started < 5
    assert f"resources.limits.nvidia.com/gpu is {shown}: accepted: a whole number of GPUs" in err


@pytest.mark.parametrize(("amount", "gpus"), [("2", 2), (2, 2), ("2e0", 2), ("0", 0), (1.0, 1)])
def test_a_gpu_quantity_kubernetes_accepts_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], amount: object, gpus: int
) -> None:
    path = write(tmp_path, "pod.yaml", pod_with({"limits": {"nvidia.com/gpu": amount}}))
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert len(report["gpus"]) == gpus


def test_gpu_requests_follow_the_api_servers_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = write(tmp_path, "a.yaml", pod_with({"requests": {"nvidia.com/gpu": 1}}))
    assert "Limit must be set for non overcommitable resources" in refused(capsys, only)
    unequal = write(
        tmp_path,
        "b.yaml",
        pod_with({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}),
    )
    assert "must be equal to nvidia.com/gpu limit" in refused(capsys, unequal)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("env", [{"name": "TF_GPU_MEM_LIMIT", "value": 4096}], "value is 4096: accepted: a string"),
        ("env", [{"name": ["x"], "value": "1"}], "env[].name is a list: accepted: a string"),
        ("env", {"a": 1}, "env is a mapping: accepted: a list"),
    ],
)
def test_kubernetes_types_are_not_coerced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, message: str
) -> None:
    extra: dict[str, Any] = {field: value}
    tf = container(None, **extra)
    path = write(tmp_path, "d.yaml", deployment("d", tf))
    assert message in refused(capsys, path)


def test_a_document_that_is_no_object_among_manifests_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kubectl refuses it ("Object 'Kind' is missing"); it was dropped without a word."""
    pasted = {"services": {"a": service(CAP, gpu("0"))}}
    path = write(tmp_path, "mixed.yaml", deployment("d", container(KUBE_CAP)), pasted)
    err = refused(capsys, path)
    assert "a document among the Kubernetes objects is a mapping: accepted: a Kubernetes" in err


def test_configmap_data_values_are_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": [1]}}
    assert "ConfigMap c data.k is a list: accepted: a string" in refused(
        capsys, write(tmp_path, "cm.yaml", cm)
    )


# --- fixes and messages ----------------------------------------------------------------------


def test_kit_off_with_a_cap_gets_the_right_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = service({"TF_GPU_CONFIG": "off", "TF_GPU_MEM_LIMIT": 4096}, gpu("0"))
    path = compose_file(tmp_path, {"off": off, "b": service(CAP, gpu("0"))})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert code == 1
    [problem] = [p for p in report["problems"] if p["who"] == "off"]
    assert (
        "TF_GPU_CONFIG=off turns the kit off: its TF_GPU_MEM_LIMIT is not applied"
        in problem["what"]
    )
    assert problem["fix"].startswith("remove TF_GPU_CONFIG=off from services.off.environment")
    assert "set TF_GPU_MEM_LIMIT" not in problem["fix"]


def test_an_invalid_env_is_not_announced_as_no_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = compose_file(tmp_path, {"a": service({"TF_GPU_MEM_LIMIT": "lots"}, gpu("0"))})
    code, out, _ = run_plan(capsys, path, "--gpu-memory", "16GiB")
    assert code == 1
    assert "No workload in the input uses a GPU." not in out
    assert "TF_GPU_MEM_LIMIT" in out and "plan fails: 1 error(s)" in out
    empty = compose_file(tmp_path, {"web": {"image": "nginx"}}, "web.yaml")
    code, out, _ = run_plan(capsys, empty, "--gpu-memory", "16GiB")
    assert code == 0 and "No workload in the input uses a GPU." in out


def test_the_same_file_twice_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused, not counted once: each file is its own project on the host, so a repeat would
    double its demand, and dropping it silently would hide a wrong argument list."""
    path = compose_file(tmp_path, {"a": service(CAP, gpu("0"))})
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    for twice in ([path, path], [path, "./compose.yaml"], [path, str(link)]):
        code, _, err = run_plan(capsys, *twice, "--gpu-memory", "16GiB")
        assert code == 2
        assert f"is the same file as {path}: accepted: each input once" in err


def test_an_unknown_profile_is_refused_naming_those_that_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = {
        "a": service(CAP, gpu("0")),
        "dbg": service(CAP, gpu("0"), profiles=["debug", "dev"]),
    }
    path = compose_file(tmp_path, services)
    code, _, err = run_plan(capsys, path, "--gpu-memory", "16GiB", "--profile", "nope")
    assert code == 2
    assert (
        "--profile 'nope' is not a profile of the inputs: the compose files name: debug, dev" in err
    )
    # a letter of a string profile is not that profile
    one = compose_file(tmp_path, {"x": service(CAP, gpu("0"), profiles="dev")}, "one.yaml")
    assert run_plan(capsys, one, "--gpu-memory", "16GiB", "--profile", "d")[0] == 2
    assert run_plan(capsys, one, "--gpu-memory", "16GiB", "--profile", "dev")[0] == 0


def test_unreadable_inputs_exit_5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (8 * 1024 * 1024 + 1))
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"services: {caf\xe9: {}}\n")
    for path, message in (
        ("/dev/zero", "not a regular file or a pipe"),
        (str(tmp_path), "not a regular file or a pipe"),
        (str(big), "larger than 8 MiB"),
        (str(latin), "not UTF-8 text"),
    ):
        code, _, err = run_plan(capsys, path, "--gpu-memory", "16GiB")
        assert code == 5, err
        assert err.startswith(f"error: {path}: cannot be read ({message}")


# --- escaping --------------------------------------------------------------------------------

HOSTILE = "x\x1b[2K\rplan OK\u202e\n"


def test_names_are_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name cannot move the cursor, recolour or rewrite the verdict."""
    doc = deployment(HOSTILE, container({"TF_GPU_MEM_LIMIT": "lots"}))
    path = write(tmp_path, "d.yaml", doc)
    code, out, _ = run_plan(capsys, path, "--gpu-memory", "16GiB")
    assert code == 1
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "Deployment/x\\x1b[2K\\rplan OK\\u202e\\n[tf]" in out
    assert out.rstrip().endswith("plan fails: 1 error(s)")


def test_rules_header_escapes_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "a\ngroups: []\n#"
    folder.mkdir()
    path = compose_file(folder, {"a": service(CAP, gpu("0"))})
    out = tmp_path / "plan.rules.yaml"
    code, _, _ = run_plan(capsys, path, "--gpu-memory", "16GiB", "--prometheus-rules", str(out))
    assert code == 0
    text = out.read_text(encoding="utf-8")
    rules = yaml.safe_load(text)
    assert list(rules) == ["groups"] and rules["groups"][0]["name"] == "tfgpu-plan"
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert len(header) == 3 and "a\\ngroups: []\\n#" in header[0]
    assert json.dumps(rules)  # plain data

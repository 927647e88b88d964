"""Property tests (Hypothesis) over `build.py plan`'s Compose and Kubernetes readers:
for any structured document with hostile values (wrong types, huge and negative numbers,
newlines, control and bidi characters, YAML/Jinja syntax, shell metacharacters), `plan` ends
without a traceback, quickly, and either refuses cleanly (exit 2, one line) or answers as a small
reference reading of the same document does. The reference below is written from the rules
themselves, not from the readers' code:
- compose-spec schema/compose-spec.json: service names `^[a-zA-Z0-9._-]+$`, a service is a
  mapping, `environment`/`labels` are list_or_dict, `device_ids` a list of unique strings;
- compose-go types/device.go: `count` and `device_ids` exclusive, `capabilities` mandatory in
  deploy devices, a count is an int or "all"/an integer string; no count is all;
- moby daemon/nvidia_linux.go: a negative count is all GPUs, N is GPUs 0…N-1;
- Kubernetes: an `nvidia.com/gpu` amount is a whole quantity ≥ 0, a request needs an equal limit,
  env values and names are strings, replicas an int32 ≥ 0.
Fixed seed (derandomize) and a small budget; the examples run are printed (`-s`) and asserted."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.memory_bound import memory_bound
from tfgpu_kit import cli
from tfgpu_kit.matrix import local_driver

HOST = ["0", "1"]  # --gpu-count 2
# per property; both together take about 20 s here (TFGPU_PLAN_EXAMPLES=5000 for a longer search)
EXAMPLES = int(os.environ.get("TFGPU_PLAN_EXAMPLES", "500"))
RAN = {"compose": 0, "kubernetes": 0}
REFUSED = {"compose": 0, "kubernetes": 0}  # of those, refused by the reference (and by plan)
SETTINGS = settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# --- hostile values --------------------------------------------------------------------------

SPECIAL = st.sampled_from(
    [
        "\n",
        "a\nb: c",
        "\r",
        "\x1b[2K\rplan OK",
        "\u202e",
        "\u2028",
        "\x85",
        "\t",
        "",
        " 0",
        "{{ x }}",
        "{% if x %}",
        "&a",
        "*a",
        "!!python/object:os.system",
        "$(rm -rf /)",
        "`id`",
        "; ls",
        "${X}",
        "$X",
        "$$",
        "a: b",
        "- x",
        "# c",
        "'",
        '"',
        "\\",
        "٣",
        "²",
    ]
)
TEXT = st.one_of(SPECIAL, st.text(max_size=8), st.builds(str.__add__, SPECIAL, st.text(max_size=4)))
NUMBER = st.one_of(
    st.integers(-3, 5),
    st.sampled_from([2**31, 2**63, 10**20, -(10**20), 99_999_999_999, 100_000]),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALAR = st.one_of(TEXT, NUMBER, st.booleans(), st.none())
ANY = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=5,
)


def sometimes(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes (about one time in eight) anything at all. (A draw,
    not st.one_of(good, …, ANY): one_of gives its branches about equal chances.)"""
    return st.integers(0, 7).flatmap(lambda i: ANY if i == 4 else good)


# --- compose documents -----------------------------------------------------------------------

GPU_IDS = [
    "0",
    "1",
    "2",
    "7",
    "GPU-aaaaaaaa-0000-4000-8000-000000000000",
    "MIG-x",
    "-1",
    "a",
    "0,1",
    "${G}",
    "",
    " 0",
]
COUNT = sometimes(
    st.sampled_from(
        [
            0,
            1,
            2,
            3,
            -1,
            -2,
            "all",
            "ALL",
            "2",
            "-1",
            "+1",
            "x",
            "${N}",
            True,
            1.5,
            10**20,
            99_999_999_999,
            100_000,
            [1],
            {"a": 1},
            None,
            "12",
        ]
    )
)
IDS = sometimes(
    st.one_of(
        st.lists(st.one_of(st.sampled_from(GPU_IDS), st.integers(0, 2), st.none()), max_size=3),
        st.sampled_from(["12", {"a": 1}, 0, None]),
    )
)
REQUEST = sometimes(
    st.fixed_dictionaries(
        {},
        optional={
            "capabilities": sometimes(st.sampled_from([["gpu"], "gpu", ["compute"], None])),
            "driver": sometimes(st.just("nvidia")),
            "count": COUNT,
            "device_ids": IDS,
        },
    )
)
ENV_KEY = st.one_of(
    st.sampled_from(["TF_GPU_MEM_LIMIT", "NVIDIA_VISIBLE_DEVICES", "TF_GPU_CONFIG", "PATH"]), TEXT
)
ENV_VALUE = sometimes(
    st.one_of(
        st.sampled_from(
            ["4GiB", "2048", "0,1", "all", "none", "off", "50%", "${CAP}", "$$4", "1,a"]
        ),
        SCALAR,
    )
)
ENV = sometimes(
    st.one_of(
        st.dictionaries(ENV_KEY, ENV_VALUE, max_size=3),
        st.lists(st.one_of(st.builds("{}={}".format, ENV_KEY, TEXT), TEXT), max_size=3),
    )
)
DEPLOY = sometimes(
    st.fixed_dictionaries(
        {},
        optional={
            "replicas": sometimes(st.sampled_from([0, 1, 2, "3", -1, True, 2**31, "x"])),
            "resources": sometimes(
                st.fixed_dictionaries(
                    {
                        "reservations": sometimes(
                            st.fixed_dictionaries(
                                {"devices": sometimes(st.lists(REQUEST, max_size=2))}
                            )
                        )
                    }
                )
            ),
        },
    )
)
SERVICE = sometimes(
    st.fixed_dictionaries(
        {"image": st.just("x")},
        optional={
            "environment": ENV,
            "gpus": sometimes(st.one_of(st.just("all"), st.lists(REQUEST, max_size=2))),
            "deploy": DEPLOY,
            "labels": sometimes(
                st.one_of(
                    st.dictionaries(st.just("io.tfgpu.processes"), SCALAR, max_size=1),
                    st.lists(st.builds("io.tfgpu.processes={}".format, TEXT), max_size=1),
                )
            ),
            "profiles": sometimes(st.sampled_from([["dev"], "dev", [], None])),
            "env_file": sometimes(st.sampled_from(["a.env", ["a.env", {"path": "b.env"}], []])),
            "scale": sometimes(st.sampled_from([1, 2, "2"])),
        },
    )
)
VALID_NAME = st.sampled_from(["a", "b", "text-model", "x.y_z"])
NAME = st.integers(0, 9).flatmap(
    lambda i: TEXT if i == 4 else st.integers(0, 3) if i == 5 else VALID_NAME
)
COMPOSE = st.dictionaries(NAME, SERVICE, min_size=1, max_size=3)


class Refused(Exception):
    """The reference says Compose, Docker or Kubernetes refuses the file."""


PROBLEM = "problem"  # the service is reported: it cannot be placed, or would not start
_VALID_ID = re.compile(r"[0-9]+|GPU-[0-9a-fA-F-]+|MIG-[0-9A-Za-z/-]+")  # tfgpu's GPU id grammar
_INTERPOLATED = re.compile(r"(?<!\$)(?:\$\$)*\$(?:\{|[A-Za-z_])")
_RELEVANT = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def as_text(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def opt_map(value: object) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused
    return value


def opt_list(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Refused
    return value


def ref_environment(raw: object) -> tuple[dict[str, str], set[str]]:
    pairs: list[tuple[str, object]] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, str):
                raise Refused
            key, sep, value = item.partition("=")
            pairs.append((key, value if sep else None))
    else:
        for key, value in opt_map(raw).items():
            if not isinstance(key, str) or not scalar(value):
                raise Refused
            pairs.append((key, value))
    env: dict[str, str] = {}
    unknown: set[str] = set()
    for key, setting in dict(pairs).items():  # a name twice: the last counts
        if not (key.startswith("TF_") or key in _RELEVANT):
            continue
        if setting is None or _INTERPOLATED.search(as_text(setting)):
            unknown.add(key)
        else:
            env[key] = as_text(setting).replace("$$", "$")
    return env, unknown


def ref_request(request: dict[Any, Any]) -> list[str] | str:
    if "count" in request and "device_ids" in request:
        raise Refused
    if "device_ids" in request:
        ids = opt_list(request["device_ids"])
        if not all(isinstance(gpu, str) for gpu in ids):
            raise Refused
        if any(_INTERPOLATED.search(gpu) for gpu in ids):
            return PROBLEM
        if not all(_VALID_ID.fullmatch(gpu) for gpu in ids) or len(set(ids)) != len(ids):
            raise Refused
        return list(ids)
    count = request.get("count", "all")
    if isinstance(count, str):
        if count.lower() == "all":
            count = -1
        elif _INTERPOLATED.search(count):
            return PROBLEM
        elif re.fullmatch(r"[+-]?[0-9]+", count):
            count = int(count)
        else:
            raise Refused
    if not isinstance(count, int) or isinstance(count, bool) or count.bit_length() > 63:
        raise Refused
    if count < 0:
        return list(HOST)
    return PROBLEM if count > len(HOST) else HOST[:count]


def ref_service(name: object, service: object) -> tuple[str, object, int]:
    """(name, GPUs | PROBLEM | None, replicas) of one service; raises Refused."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-zA-Z0-9._-]+", name):
        raise Refused
    if not isinstance(service, dict):
        raise Refused
    profiles = service.get("profiles")
    profiles = [profiles] if isinstance(profiles, str) else opt_list(profiles)
    if not all(isinstance(p, str) for p in profiles):
        raise Refused
    env, unknown = ref_environment(service.get("environment"))
    env_file = service.get("env_file")
    if env_file is not None and not isinstance(env_file, str):
        for item in opt_list(env_file):
            if not isinstance(item, str) and not isinstance(opt_map(item).get("path"), str):
                raise Refused
    deploy = opt_map(service.get("deploy"))
    reservations = opt_map(opt_map(deploy.get("resources")).get("reservations"))
    requests: list[dict[Any, Any]] = []
    for request in opt_list(reservations.get("devices")):
        request = opt_map(request) if request is not None else None
        if request is None or "capabilities" not in request:
            raise Refused
        caps = request["capabilities"]
        caps = [caps] if isinstance(caps, str) else opt_list(caps)
        if not all(isinstance(c, str) for c in caps):
            raise Refused
        driver = request.get("driver")
        if driver is not None and not isinstance(driver, str):
            raise Refused
        if "gpu" in caps or driver == "nvidia":
            requests.append(request)
    gpus = service.get("gpus")
    if isinstance(gpus, str):
        if gpus != "all":
            raise Refused
        requests.append({"count": "all"})
    else:
        for request in opt_list(gpus):
            if not isinstance(request, dict):
                raise Refused
            requests.append(request)
    placed = [ref_request(r) for r in requests]
    replicas_raw = deploy["replicas"] if "replicas" in deploy else service.get("scale", 1)
    labels = service.get("labels")
    if isinstance(labels, list):
        if not all(isinstance(item, str) for item in labels):
            raise Refused
    else:
        for key, value in opt_map(labels).items():
            if not isinstance(key, str) or not scalar(value):
                raise Refused
    if not scalar(replicas_raw):
        raise Refused
    text = as_text(replicas_raw)
    replicas = int(text) if re.fullmatch(r"[0-9]{1,10}", text) and int(text) < 2**31 else 1
    if profiles:  # not started without --profile (none is given): checked, not planned
        return name, None, 0
    ids: list[str] = []
    if placed:
        for each in placed:
            if each == PROBLEM:
                return name, PROBLEM, replicas
            ids += [gpu for gpu in each if gpu not in ids]
    elif "NVIDIA_VISIBLE_DEVICES" in env:
        value = env["NVIDIA_VISIBLE_DEVICES"].strip()
        if value in ("", "none", "void"):
            return name, None, replicas
        ids = list(HOST) if value == "all" else [part.strip() for part in value.split(",")]
        if not all(_VALID_ID.fullmatch(gpu) for gpu in ids) or len(set(ids)) != len(ids):
            return name, PROBLEM, replicas
    elif "NVIDIA_VISIBLE_DEVICES" in unknown:
        return name, PROBLEM, replicas
    if any(re.fullmatch("[0-9]+", gpu) and gpu not in HOST for gpu in ids):
        return name, PROBLEM, replicas
    return name, (ids or None), replicas


# --- Kubernetes documents --------------------------------------------------------------------

# (amount, GPUs it means, or None when the API server refuses it)
AMOUNTS: list[tuple[object, int | None]] = [
    (1, 1),
    (2, 2),
    ("2", 2),
    ("0", 0),
    (0, 0),
    ("2e0", 2),
    (1.0, 1),
    ("+1", 1),
    ("1k", None),
    ("x", None),
    ("-1", None),
    (-1, None),
    ("1.5", None),
    ("500m", None),
    (True, None),
    (65, None),
    ("1Ki", None),
    ("1e999999999", None),
    (None, None),
    ([1], None),
]
AMOUNT = st.sampled_from([amount for amount, _ in AMOUNTS])
GPU = "nvidia.com/gpu"
RESOURCES = st.one_of(
    st.builds(lambda a: {"limits": {GPU: a}}, AMOUNT),
    st.builds(lambda a: {"requests": {GPU: a}}, AMOUNT),
    st.builds(lambda a, b: {"limits": {GPU: a}, "requests": {GPU: b}}, AMOUNT, AMOUNT),
    st.builds(lambda a: {"limits": {"cpu": "1", GPU: a}}, AMOUNT),
)
KUBE_ENV = sometimes(
    st.lists(
        sometimes(
            st.fixed_dictionaries(
                {
                    "name": sometimes(
                        st.sampled_from(["TF_GPU_MEM_LIMIT", "NVIDIA_VISIBLE_DEVICES", "PATH"])
                    )
                },
                optional={
                    "value": sometimes(
                        st.sampled_from(["4GiB", "0", "all", "lots", "$(X)", "none", ""])
                    )
                },
            )
        ),
        max_size=3,
    )
)
KUBE_OBJECT = st.fixed_dictionaries(
    {
        "name": sometimes(TEXT),
        "container": sometimes(TEXT),
        "kind": st.sampled_from(["Deployment", "Pod"]),
        "replicas": sometimes(st.sampled_from([0, 1, 3, -1, "2", True, 2**31])),
        "env": KUBE_ENV,
        "resources": sometimes(RESOURCES),
    }
)
KUBE = st.tuples(st.lists(KUBE_OBJECT, min_size=1, max_size=3), st.booleans())


def kube_document(spec: dict[str, Any], index: int) -> dict[str, Any]:
    name = spec["name"] + f"-{index}" if isinstance(spec["name"], str) else spec["name"]
    container = {
        "name": spec["container"],
        "image": "x",
        "env": spec["env"],
        "resources": spec["resources"],
    }
    pod_spec = {"containers": [container]}
    if spec["kind"] == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": spec["replicas"], "template": {"spec": pod_spec}},
    }


def amount_of(value: object) -> int:
    for known, gpus in AMOUNTS:
        if type(known) is type(value) and known == value:
            if gpus is None:
                raise Refused
            return gpus
    raise Refused


def ref_kube(doc: dict[str, Any]) -> tuple[str, object, int]:
    """(who, GPU count | PROBLEM | None, replicas); raises Refused."""
    name = doc["metadata"]["name"]
    [container] = (
        doc["spec"]["containers"]
        if doc["kind"] == "Pod"
        else (doc["spec"]["template"]["spec"]["containers"])
    )
    if not isinstance(name, str) or not isinstance(container["name"], str):
        raise Refused
    env: dict[str, str] = {}
    for item in opt_list(container["env"]):
        item = opt_map(item) if item is not None else None
        if item is None or not isinstance(item.get("name"), str):
            raise Refused
        value = item.get("value")
        if value is not None and not isinstance(value, str):
            raise Refused
        key = item["name"]
        if key.startswith("TF_") or key in _RELEVANT:
            env.pop(key, None)
            if "$(" not in (value or ""):
                env[key] = value or ""
    resources = opt_map(container["resources"])
    requests, limits = opt_map(resources.get("requests")), opt_map(resources.get("limits"))
    if not all(isinstance(k, str) for k in (*requests, *limits)):
        raise Refused
    count = 0
    gpu = GPU
    if gpu in requests and gpu not in limits:
        raise Refused
    if gpu in limits:
        count = amount_of(limits[gpu])
        if gpu in requests and amount_of(requests[gpu]) != count:
            raise Refused
    replicas = 1
    if doc["kind"] == "Deployment":
        raw = doc["spec"]["replicas"]
        if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 2**31:
            replicas = raw
    who = f"{doc['kind']}/{name}[{container['name']}]"
    if count:
        return who, count, replicas
    visible = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    return who, (PROBLEM if visible and visible not in ("none", "void") else None), replicas


# --- running plan ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_driver, "gpu_memory", lambda missing: (None, "no driver (test)"))


@contextlib.contextmanager
def captured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def plan(path: Path) -> tuple[int, str, str]:
    started = time.monotonic()
    with captured() as (out, err), memory_bound():  # at most 1 GiB more, or MemoryError fails
        code = cli.main(["plan", str(path), "--gpu-memory", "16GiB", "--gpu-count", "2", "--json"])
    assert time.monotonic() - started < 5, "plan took too long"
    return code, out.getvalue(), err.getvalue()


def check_answer(code: int, out: str, err: str, expected: list[tuple[str, object, int]]) -> None:
    """plan agrees with the reference: refused exactly when it says so, else each workload's
    GPUs are its GPUs (or it is reported)."""
    if not expected:  # the reference refuses
        assert code == 2, (code, out, err)
        assert out == "" and err.startswith("error: ") and err.count("\n") <= 2, err
        return
    assert code in (0, 1), (code, out, err)
    report = json.loads(out)
    placed: dict[str, list[str]] = {}
    for budget in report["gpus"]:
        for entry in budget["entries"]:
            placed.setdefault(entry["who"], []).append(budget["gpu"])
    reported = {p["who"] for p in report["problems"] if p["severity"] == "error"}
    for who, gpus, replicas in expected:
        if replicas == 0 or gpus is None:
            assert who not in placed, (who, report)
            continue
        if gpus == PROBLEM:
            assert who in reported and who not in placed, (who, report)
            continue
        if who in reported and who not in placed:  # e.g. a cap the runtime refuses (exit 78)
            continue
        if isinstance(gpus, int):  # Kubernetes: GPUs of its own, or a time-sliced pool
            assert len(placed.get(who, [])) == gpus, (who, report)
        else:
            assert isinstance(gpus, list)
            assert sorted(placed.get(who, [])) == sorted(gpus), (who, gpus, report)


@SETTINGS
@given(services=COMPOSE)
def test_compose_readers_agree_with_the_reference(tmp_path: Path, services: dict[Any, Any]) -> None:
    RAN["compose"] += 1
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump({"services": services}, sort_keys=False), encoding="utf-8")
    try:
        expected = [ref_service(name, service) for name, service in services.items()]
    except Refused:
        expected = []
        REFUSED["compose"] += 1
    check_answer(*plan(path), expected)


@SETTINGS
@given(case=KUBE)
def test_kubernetes_readers_agree_with_the_reference(
    tmp_path: Path, case: tuple[list[dict[str, Any]], bool]
) -> None:
    RAN["kubernetes"] += 1
    specs, as_list = case
    docs = [kube_document(spec, index) for index, spec in enumerate(specs)]
    path = tmp_path / "k8s.yaml"
    body = [{"apiVersion": "v1", "kind": "List", "items": docs}] if as_list else docs
    path.write_text(yaml.safe_dump_all(body, sort_keys=False), encoding="utf-8")
    try:
        expected = [ref_kube(doc) for doc in docs]
    except Refused:
        expected = []
        REFUSED["kubernetes"] += 1
    check_answer(*plan(path), expected)


def test_examples_ran() -> None:
    """The number of examples, for the record (pytest -s prints it)."""
    if not any(RAN.values()):
        pytest.skip("the property tests did not run in this session")
    print(f"plan property examples: {RAN}, refused: {REFUSED}")
    assert all(count >= EXAMPLES // 2 for count in RAN.values()), RAN
    # both outcomes are exercised: refusals and answers compared GPU by GPU
    assert all(0 < REFUSED[reader] < RAN[reader] for reader in RAN), (RAN, REFUSED)

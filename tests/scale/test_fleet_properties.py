"""Properties of the whole fleet surface: for any combination of roles (workers, parameter
servers), forms (Indexed Jobs, JobSet, Trainer), flags and --env, either `./kit k8s` refuses
(exit 2, naming the flag or the role) or every pod it renders gets an environment that its
runtime accepts for its role, each pod of each group, and `./kit plan` agrees with the runtime
on what starts."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import parse_environment

from tests.scale.helpers import training_pods
from tests.scale.test_k8s_trainer import _expand
from tfgpu_kit import cli

IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
ENV_CHOICES = [
    "TF_GPU_RECOVER_AT=95%",
    "TF_GPU_RECOVER_ACTION=exit",
    "TF_GPU_RECOVER_ACTION=report",
    "TF_GPU_RECOVER_AFTER=10m",
    "TF_GPU_REQUIRED=true",
    "TF_GPU_PS_GPUS=true",
    "TF_GPU_PS_GPUS=false",
    "TF_GPU_QUIET=true",
    "TF_GPU_ALLOCATOR=cuda_malloc_async",
    "TF_MIXED_PRECISION=mixed_float16",
    "TF_FORCE_GPU_ALLOW_GROWTH=false",
    "TF_GPU_METRICS_ADDR=0.0.0.0",
]


def _pods(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """(pod template, how many pods of it) of every training workload."""
    found = []
    for doc in docs:
        for pod in training_pods(doc):
            spec = doc["spec"] if doc["kind"] == "Job" else None
            count = int(spec["completions"]) if spec is not None else 0
            if count == 0:  # a JobSet's or a runtime's replicatedJob: its Job's completions
                jobs = (
                    doc["spec"]["replicatedJobs"]
                    if doc["kind"] == "JobSet"
                    else doc["spec"]["template"]["spec"]["replicatedJobs"]
                )
                job = next(j for j in jobs if j["template"]["spec"]["template"] is pod)
                count = int(job["template"]["spec"]["completions"])
            found.append((pod, count))
    return found


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    workers=st.integers(1, 3),
    ps=st.integers(0, 2),
    form=st.sampled_from(["jobs", "jobset", "trainer"]),
    cap=st.sampled_from([None, "4GiB", "40%"]),
    env=st.lists(st.sampled_from(ENV_CHOICES), unique_by=lambda e: e.split("=")[0], max_size=4),
)
@example(workers=2, ps=1, form="jobs", cap="4GiB", env=["TF_GPU_RECOVER_AT=95%"])
@example(
    workers=2,
    ps=1,
    form="jobset",
    cap="4GiB",
    env=["TF_GPU_RECOVER_ACTION=exit", "TF_GPU_RECOVER_AT=95%"],
)
@example(workers=2, ps=1, form="trainer", cap="4GiB", env=["TF_GPU_REQUIRED=true"])
def test_every_pod_starts_or_k8s_refuses(
    capsys: pytest.CaptureFixture[str],
    workers: int,
    ps: int,
    form: str,
    cap: str | None,
    env: list[str],
) -> None:
    flags = ["--kind", "job", "--workers", str(workers), "--name", "t"]
    flags += ["--ps", str(ps)] if ps else []
    flags += {"jobs": [], "jobset": ["--jobset"], "trainer": ["--trainer"]}[form]
    flags += ["--mem-limit", cap] if cap else []
    for item in env:
        flags += ["--env", item]
    with tempfile.TemporaryDirectory() as out:
        code = cli.main(["k8s", "--image", IMAGE, "--out", out, *flags])
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        if code != 0:
            assert code == 2 and "error: " in captured.err, captured.err
            return
        files = sorted(str(p) for p in Path(out).glob("*.yaml"))
        docs = [d for f in files for d in yaml.safe_load_all(Path(f).read_text()) if d]
        pods = _pods(docs)
        assert pods
        for pod, count in pods:
            labels = {**pod["metadata"]["labels"], "jobset.sigs.k8s.io/jobset-name": "t-train"}
            [container] = pod["spec"]["containers"]
            own = _expand(container.get("env", []), labels)
            own.pop("JOBSET_NAME", None)
            for index in range(count):  # every pod of the group, as the runtime reads it
                try:
                    parse_environment({**own, "JOB_COMPLETION_INDEX": str(index)})
                except ConfigError as error:
                    pytest.fail(f"{flags}: a pod would exit 78: {error}")
        code = cli.main(["plan", *files, "--json", "--gpu-memory", "80GiB"])
        report = yaml.safe_load(capsys.readouterr().out)
        if form == "trainer":  # a runtime is a template: plan says so, never "OK"
            assert code == 1 and [p["who"] for p in report["problems"]] == ["TrainJob/t-train"]
            return
        refusals = [p for p in report["problems"] if "exit 78" in p["fix"]]
        assert refusals == [], (flags, refusals)

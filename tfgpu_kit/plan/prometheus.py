"""The plan as Prometheus recording rules (`build.py plan … --prometheus-rules OUT`).

One constant series per GPU of the host the plan is for, which the kit's alert
`TfgpuGpuOverPlan` (monitoring/tfgpu-alerts.rules.yaml) compares with the card's used memory:

    tfgpu_plan_committed_bytes{gpu="0", uuid="GPU-…"}   caps plus CUDA contexts on the card
    tfgpu_plan_gpu_memory_bytes{gpu="0", uuid="GPU-…"}  the card's memory the plan assumed

`gpu` is the host's GPU id, as DCGM's `gpu` label counts; `uuid` (from --gpu-uuid) lets the
kit's own per-process figure join (inside a container the GPU index restarts at 0, the UUID
does not). Kubernetes budgets have no fixed GPU (the scheduler picks one) and are left out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import yaml
from tfgpu.contract.settings import is_ascii_number

from tfgpu_kit.plan.budget import GpuBudget
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.output import BYTES_PER_MIB
from tfgpu_kit.shared.yamlfile import shown

COMMITTED = "tfgpu_plan_committed_bytes"
MEMORY = "tfgpu_plan_gpu_memory_bytes"
GROUP = "tfgpu-plan"
# NVML's UUIDs: "GPU-" and 8-4-4-4-12 hex digits (`nvidia-smi -L` prints them)
_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
UUID_EXAMPLE = "0=GPU-fa6e0000-0000-4000-8000-000000000000"


def parse_gpu_uuids(values: Sequence[str]) -> dict[str, str]:
    """`--gpu-uuid ID=UUID` values as {host GPU id: UUID}."""
    found: dict[str, str] = {}
    for value in values:
        gpu, sep, uuid = value.partition("=")
        gpu, uuid = gpu.strip(), uuid.strip()
        if not sep or not is_ascii_number(gpu) or not _UUID.fullmatch(uuid):
            raise UsageError(
                f"--gpu-uuid {value!r} is not accepted: accepted: a host GPU id and its UUID "
                f"as `nvidia-smi -L` prints it, ID=GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx; "
                f"example: --gpu-uuid {UUID_EXAMPLE}"
            )
        if found.get(gpu, uuid) != uuid:
            raise UsageError(
                f"--gpu-uuid gives GPU {gpu} two UUIDs ({found[gpu]} and {uuid}): "
                f"give each GPU once; example: --gpu-uuid {UUID_EXAMPLE}"
            )
        found[gpu] = uuid
    return found


def host_budgets(budgets: Sequence[GpuBudget]) -> list[GpuBudget]:
    """The budgets of GPUs with a fixed host id (compose), the only ones a series can name."""
    return [b for b in budgets if b.sharing == "host"]


def recording_rules(
    budgets: Sequence[GpuBudget], *, uuids: Mapping[str, str], sources: Sequence[str]
) -> str:
    """A Prometheus rules file (YAML) with the series above, one pair per host GPU."""
    known = {b.gpu for b in host_budgets(budgets)}
    stray = sorted(set(uuids) - known)
    if stray:
        raise UsageError(
            f"--gpu-uuid names GPU {', '.join(stray)}, which no service of the plan uses "
            f"(GPUs in the plan: {', '.join(sorted(known)) or 'none'}); "
            f"example: --gpu-uuid {UUID_EXAMPLE}"
        )
    # vector(): a recording rule records a vector; the labels name the GPU (a dict per rule:
    # one dict twice would be dumped as a YAML anchor and alias)
    rules = [
        {
            "record": name,
            "expr": f"vector({round(mib * BYTES_PER_MIB)})",
            "labels": {"gpu": budget.gpu}
            | ({"uuid": uuids[budget.gpu]} if budget.gpu in uuids else {}),
        }
        for budget in host_budgets(budgets)
        for name, mib in ((COMMITTED, budget.committed_mib), (MEMORY, budget.memory_mib))
    ]
    # file names escaped (a newline in one would end the comment and add a YAML key)
    named = " ".join(shown(source) for source in sources)
    header = (
        f"# Written by `build.py plan {named} --prometheus-rules …`: the GPU memory\n"
        "# budget per GPU, for the alert TfgpuGpuOverPlan (monitoring/tfgpu-alerts.rules.yaml).\n"
        "# Load it beside that file (rule_files); rewrite it whenever the plan changes.\n"
    )
    body = yaml.safe_dump({"groups": [{"name": GROUP, "rules": rules}]}, sort_keys=False)
    return header + body

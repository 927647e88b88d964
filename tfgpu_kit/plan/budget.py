"""Place workloads on GPUs, add up caps plus CUDA context overhead, and judge.

One GPU on a host is shared by every process whose GPUs include it. On
Kubernetes, a whole `nvidia.com/gpu` is never shared between pods; with
time-slicing, the scheduler may put any R slices of a pool on one physical GPU,
so the budget checks the worst case: the R largest demands together."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tfgpu.contract.errors import ConfigError
from tfgpu.contract.names import JOB_INDEX, UnknownName
from tfgpu.contract.settings import is_ascii_number

from tfgpu_kit.plan import caps as caps_mod
from tfgpu_kit.plan.envvars import CAP_VARIABLES
from tfgpu_kit.plan.model import Placement, Problem, Workload
from tfgpu_kit.shared.output import mib

SUGGESTION_STEP_MIB = 256  # suggested caps are rounded down to this
# Unresolved values that say how many processes run at once (compose's label, Kubernetes' fields
# and the tfgpu.io/processes annotation)
COUNTS = ("replicas", "parallelism", "completions", "io.tfgpu.processes", "tfgpu.io/processes")


@dataclass(frozen=True)
class GpuMemory:
    """The memory of each GPU: NVML's figure for a known id, else the --gpu-memory value."""

    default_mib: float
    known: Mapping[str, float] = field(default_factory=dict)
    # unified memory (a Jetson: the GPU allocates from the CPU's RAM): what the OS and the
    # non-TensorFlow processes keep; percentages still resolve against the whole (as the runtime
    # does, from MemTotal), but only the rest is there for the caps (plan/unified.py)
    reserve_mib: float = 0.0

    def of(self, gpu: str) -> float:
        return self.known.get(gpu, self.default_mib)

    def capacity(self, gpu: str | None = None) -> float:
        return (self.default_mib if gpu is None else self.of(gpu)) - self.reserve_mib


def mixed_sizes_note(memory: GpuMemory, workloads: list[Workload]) -> str | None:
    """Say so when NVML's GPUs differ in memory and some workload's GPU is not known."""
    sizes = set(memory.known.values())
    if len(sizes) < 2:
        return None
    unknown = [
        w.who
        for w in workloads
        if w.replicas != 0
        and (
            w.gpus.placement in (Placement.EXCLUSIVE, Placement.TIME_SLICED)
            or any(g not in memory.known for g in w.gpus.host_gpus)
        )
    ]
    if not unknown:
        return None
    return (
        f"the GPUs differ in memory ({min(sizes):.0f} to {max(sizes):.0f} MiB) and which one "
        f"runs {', '.join(unknown)} is not known: budgeted on the smallest ({min(sizes):.0f} "
        "MiB); pass --gpu-memory SIZE to budget on another size"
    )


@dataclass
class Entry:
    who: str
    source: str
    instances: int  # replicas (or time-sliced pods) of this workload on the GPU
    processes: int  # TensorFlow processes per instance
    cap_mib: float | None  # per process; None = no cap: the process may take the whole card
    overhead_mib: float  # per process (CUDA context)
    growth: bool | None = None
    fix_hint: str = ""
    kit_off: bool = False  # TF_GPU_CONFIG=off: the kit applies none of its variables
    ignored_caps: tuple[str, ...] = ()  # cap variables set but not applied (kit off)

    @property
    def count(self) -> int:
        return self.instances * self.processes

    @property
    def demand_mib(self) -> float | None:
        """Per instance."""
        return None if self.cap_mib is None else self.processes * (self.cap_mib + self.overhead_mib)

    @property
    def total_mib(self) -> float | None:
        demand = self.demand_mib
        return None if demand is None else self.instances * demand

    def as_dict(self) -> dict[str, object]:
        return {
            **_fields(self, "who", "source", "instances"),
            "processes_per_instance": self.processes,
            **_fields(self, "cap_mib", "overhead_mib", "total_mib"),
        }


@dataclass
class GpuBudget:
    gpu: str  # a host GPU id, or a description of a Kubernetes GPU
    sharing: str  # "host", "exclusive" or "time-sliced ×R (worst case)"
    memory_mib: float
    entries: list[Entry] = field(default_factory=list)
    not_shown: int = 0  # time-sliced pods in the pool outside the worst case

    @property
    def processes(self) -> int:
        return sum(e.count for e in self.entries)

    @property
    def uncapped(self) -> list[Entry]:
        return [e for e in self.entries if e.cap_mib is None]

    @property
    def committed_mib(self) -> float:
        """Caps plus overheads of the capped processes, and the overhead of the rest."""
        return sum(
            e.total_mib if e.total_mib is not None else e.count * e.overhead_mib
            for e in self.entries
        )

    @property
    def headroom_mib(self) -> float | None:
        return None if self.uncapped else self.memory_mib - self.committed_mib

    def as_dict(self) -> dict[str, object]:
        keys = ("gpu", "sharing", "memory_mib", "processes", "committed_mib", "headroom_mib")
        return {
            **_fields(self, *keys),
            "uncapped": [e.who for e in self.uncapped],
            "not_shown": self.not_shown,
            "entries": [e.as_dict() for e in self.entries],
        }


def _fields(item: object, *names: str) -> dict[str, object]:
    return {name: getattr(item, name) for name in names}


def build(
    workloads: Sequence[Workload], *, memory: GpuMemory, overhead_mib: float
) -> tuple[list[GpuBudget], list[Problem]]:
    host: dict[str, GpuBudget] = {}
    exclusive: list[GpuBudget] = []
    pools: dict[str, tuple[int, list[Entry]]] = {}
    problems: list[Problem] = []
    for workload in workloads:
        if workload.gpus.placement is Placement.NONE:
            _check_without_gpu(workload, problems)
            continue
        if workload.replicas == 0 or not _resolvable(workload, problems):
            continue
        gpus = workload.gpus
        totals = (
            [memory.of(g) for g in gpus.host_gpus]
            if gpus.placement is Placement.HOST
            else [memory.default_mib] * gpus.count
        )
        try:
            caps = caps_mod.resolve(workload.env, totals)
        except ConfigError as error:
            fix = _fix(workload, error, totals)
            problems.append(Problem("error", workload.who, str(error), fix))
            continue
        problems.extend(Problem("warning", workload.who, w, "") for w in caps.warnings)
        ignored = () if caps.enabled else tuple(v for v in CAP_VARIABLES if v in workload.env)
        for index, cap in enumerate(caps.per_gpu):
            entry = Entry(
                workload.who,
                workload.source,
                instances=workload.replicas,
                processes=workload.processes,
                cap_mib=cap,
                overhead_mib=overhead_mib,
                growth=caps.growth,
                fix_hint=workload.fix_hint,
                kit_off=not caps.enabled,
                ignored_caps=ignored,
            )
            if gpus.placement is Placement.HOST:
                gpu = gpus.host_gpus[index]
                found = host.setdefault(gpu, GpuBudget(gpu, "host", memory.capacity(gpu)))
                found.entries.append(entry)
            elif gpus.placement is Placement.EXCLUSIVE:
                # Every replica gets GPUs of its own: judge one replica's processes.
                entry.instances = 1
                label = workload.who + (f" #{index}" if gpus.count > 1 else "")
                exclusive.append(
                    GpuBudget(label, f"exclusive {gpus.resource}", totals[index], [entry])
                )
            else:
                _, pool = pools.setdefault(gpus.resource, (gpus.slices_per_gpu, []))
                pool.append(entry)
    budgets = [host[k] for k in sorted(host, key=_gpu_order)] + exclusive
    budgets += [
        _worst_case(resource, slices, entries, memory.capacity())
        for resource, (slices, entries) in sorted(pools.items())
    ]
    for budget in budgets:
        problems.extend(_judge(budget))
    return budgets, problems


def _check_without_gpu(workload: Workload, problems: list[Problem]) -> None:
    """A container with the kit's variables and no GPU (a parameter server): nothing to budget,
    but a value its runtime refuses stops it at start (exit 78), and with it the run."""
    if workload.unresolved and any(u.what in ("env_file", "envFrom") for u in workload.unresolved):
        return  # what it really gets is not in the files: said by the notes, not judged
    try:
        caps_mod.resolve(workload.env, [])
    except ConfigError as error:
        what = f"{error} (a container without a GPU)"
        problems.append(Problem("error", workload.who, what, _fix(workload, error)))


def _fix(workload: Workload, error: ConfigError, totals: Sequence[float] = ()) -> str:
    """Where to fix a refused value, and what the container would really do with it: a value is
    refused at start (exit 78); a misspelt name is only warned about, and the container runs as
    the runtime reads the rest of its environment."""
    where = f"fix it in {workload.fix_hint}"
    if not isinstance(error, UnknownName):
        return f"{where}: the container would refuse to start (exit 78)"
    meant = f"as if {error.closest} were not set"
    rest = {k: v for k, v in workload.env.items() if k != error.variable}
    try:
        caps = caps_mod.resolve(rest, totals)
    except ConfigError as other:  # the rest holds a refusal of its own
        return f"{where}; and then: {other}"
    if caps.enabled and totals and all(cap is None for cap in caps.per_gpu):
        memory = (
            "it grows on demand up to the whole GPU"
            if caps.growth
            # plan reads no image: the kit's images set TF_GPU_MEMORY_GROWTH=true
            else "it can take all of every GPU it sees (at start; on demand in the kit's "
            "images, which set TF_GPU_MEMORY_GROWTH=true)"
        )
        meant += f": with no cap, {memory}"
    return f"{where}: the container would start, warn that the name is ignored, and run {meant}"


def _gpu_order(gpu: str) -> tuple[int, int, str]:
    """Indexes in numeric order (by length, then text: no int() of a file's digits), then ids."""
    if is_ascii_number(gpu):
        digits = gpu.lstrip("0")
        return (0, len(digits), digits)
    return (1, 0, gpu)


def _resolvable(workload: Workload, problems: list[Problem]) -> bool:
    """Report what the files do not say; False when the workload cannot be budgeted."""

    def report(what: str, fix: str, severity: str = "error") -> None:
        problems.append(Problem(severity, workload.who, what, fix))

    gpus = workload.gpus
    ok = gpus.placement not in (Placement.UNKNOWN, Placement.REFUSED)
    if gpus.placement is Placement.UNKNOWN:
        report(
            f"which GPUs it uses is unknown: {gpus.reason}",
            "name the GPUs in the file (device_ids, NVIDIA_VISIBLE_DEVICES, nvidia.com/gpu limits)",
        )
    if gpus.placement is Placement.REFUSED:
        report(
            gpus.reason,
            "ask for GPUs the host has (device_ids, count, NVIDIA_VISIBLE_DEVICES), or "
            "give the host's GPU count with --gpu-count N",
        )
    shared = _shared_index(workload)
    if shared is not None:
        report(shared[0], shared[1])
        ok = False
    has_cap = any(name in workload.env for name in CAP_VARIABLES)
    for item in workload.unresolved:
        if item.what in (*CAP_VARIABLES, "TF_GPU_CONFIG") or (
            item.what in ("env_file", "envFrom") and not has_cap
        ):
            report(
                f"its cap is unknown: {item.what}: {item.why}",
                f"set TF_GPU_MEM_LIMIT with a literal value in {workload.fix_hint}",
            )
            ok = False
        elif item.what in COUNTS:
            report(
                f"how many run at once is unknown: {item.what} {item.why}", "give a literal number"
            )
        elif item.what not in ("env_file", "envFrom"):
            report(f"{item.what}: {item.why}", "", severity="warning")
    return ok


def _shared_index(workload: Workload) -> tuple[str, str] | None:
    """(what, fix) when the replicas of one multi-worker workload would all be the same worker:
    the index the runtime reads (TF_GPU_WORKER_INDEX, else JOB_COMPLETION_INDEX) is one literal
    of the file, not Kubernetes' per-pod value; or one TF_CONFIG names one task for all. Run,
    worker 0 exits with a coordination-service error and the others hang."""
    env = workload.env
    if workload.replicas <= 1:
        return None
    if env.get("TF_CONFIG", "").strip():
        return (
            f"its {workload.replicas} replicas share one TF_CONFIG, so all are the same task",
            f"give each worker its own TF_CONFIG, or set TF_GPU_WORKERS in an Indexed Job "
            f"({workload.fix_hint})",
        )
    if not env.get("TF_GPU_WORKERS", "").strip():
        return None
    for name in ("TF_GPU_WORKER_INDEX", JOB_INDEX):
        if env.get(name, "").strip() and not (name == JOB_INDEX and workload.index_per_pod):
            return (
                f"its {workload.replicas} replicas are {env['TF_GPU_WORKERS'].strip()} "
                f"workers, but {name}={env[name]!r} gives them all one index",
                f"remove {name} from {workload.fix_hint}: run the workers as an Indexed Job, "
                f"whose pods Kubernetes numbers ({JOB_INDEX}), or one service per worker",
            )
    return None


def _off(entry: Entry) -> str:
    if not entry.kit_off:
        return ""
    ignored = (
        f": its {' and '.join(entry.ignored_caps)} is not applied" if entry.ignored_caps else ""
    )
    return f" (TF_GPU_CONFIG=off turns the kit off{ignored})"


def _uncapped_fix(entry: Entry, example: str) -> str:
    """The fix for an uncapped process; with the kit off, setting a cap would change nothing until
    it is on again."""
    if not entry.kit_off:
        return f"set TF_GPU_MEM_LIMIT in {entry.fix_hint}, {example}"
    if entry.ignored_caps:
        return (
            f"remove TF_GPU_CONFIG=off from {entry.fix_hint}, so that its "
            f"{' and '.join(entry.ignored_caps)} is applied (or cap the process in its own code)"
        )
    return (
        f"remove TF_GPU_CONFIG=off from {entry.fix_hint} and set TF_GPU_MEM_LIMIT, {example} "
        "(or cap the process in its own code)"
    )


def _worst_case(resource: str, slices: int, entries: list[Entry], memory_mib: float) -> GpuBudget:
    """The `slices` largest per-pod demands of a time-sliced pool, on one GPU. An uncapped
    pod counts as the largest (it may take the whole card)."""
    # Take the largest demands first, a workload's instances together: never a list per instance
    # (a file's replicas can be 2^31-1).
    ranked = sorted(
        entries,
        key=lambda e: -(e.demand_mib if e.demand_mib is not None else math.inf),
    )
    chosen: list[Entry] = []
    left = slices
    for entry in ranked:
        if left <= 0:
            break
        taken = min(entry.instances, left)
        chosen.append(dataclasses.replace(entry, instances=taken))
        left -= taken
    total = sum(e.instances for e in entries)
    sharing = f"time-sliced ×{slices} (worst case)"
    return GpuBudget(f"any {resource}", sharing, memory_mib, chosen, max(0, total - slices))


def _judge(budget: GpuBudget) -> list[Problem]:
    problems: list[Problem] = []
    where = f"GPU {budget.gpu}" if budget.sharing == "host" else budget.gpu
    committed = budget.committed_mib
    if budget.processes > 1:
        share = (budget.memory_mib - committed) / max(sum(e.count for e in budget.uncapped), 1)
        suggestion = math.floor(share / SUGGESTION_STEP_MIB) * SUGGESTION_STEP_MIB
        example = (
            f"e.g. TF_GPU_MEM_LIMIT={suggestion} (what is left after the others' caps and contexts)"
            if suggestion > 0
            else "and lower the others' caps: nothing is left"
        )
        for entry in budget.uncapped:
            growth = (
                " (TF_GPU_MEMORY_GROWTH alone is not a cap: it grows until the card is full)"
                if entry.growth
                else ""
            )
            what = (
                f"has no memory cap on {where}, shared by {budget.processes} TensorFlow "
                f"processes: it would take the whole card{growth}{_off(entry)}"
            )
            problems.append(Problem("error", entry.who, what, _uncapped_fix(entry, example)))
    if not budget.uncapped and committed > budget.memory_mib:
        fix = (
            f"lower the caps so that any {sum(e.instances for e in budget.entries)} of these "
            "pods fit on one GPU, or lower the time-slicing replicas"
            if budget.sharing.startswith("time-sliced")
            else f"lower the caps by {mib(committed - budget.memory_mib)} MiB in total, or move "
            "a workload to another GPU"
        )
        what = (
            f"{where} is over-committed: {mib(committed)} MiB of {mib(budget.memory_mib)} MiB "
            f"(caps plus {budget.processes} × {mib(budget.entries[0].overhead_mib)} MiB CUDA "
            "context)"
        )
        problems.append(Problem("error", ", ".join(e.who for e in budget.entries), what, fix))
    return problems

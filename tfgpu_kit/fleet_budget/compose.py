"""Read a compose file into Workloads: one per service that sees a GPU.

Understood: `deploy.resources.reservations.devices` and the service-level `gpus:`
(`device_ids`, `count`, `count: all`), `NVIDIA_VISIBLE_DEVICES` (with the nvidia
runtime), `CUDA_VISIBLE_DEVICES`, `deploy.replicas`/`scale`, `profiles`, and the
label `io.tfgpu.processes` (TensorFlow processes per container, default 1).
Not resolved but reported: `${VAR}` interpolation and `env_file`, whose values
come from outside the file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tfgpu.settings import is_ascii_number

from tfgpu_kit.fleet_budget import devices, envvars
from tfgpu_kit.fleet_budget.model import GpuRequest, Placement, Unresolved, Workload

PROCESSES_LABEL = "io.tfgpu.processes"


def is_compose(doc: object) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("services"), Mapping)


def read(
    doc: Mapping[str, Any],
    *,
    source: str,
    host_gpus: Sequence[str] | None,
    profiles: Sequence[str] = (),
) -> tuple[list[Workload], list[str]]:
    """Workloads of the services that see a GPU, and notes about the file."""
    workloads: list[Workload] = []
    notes: list[str] = []
    for name, service in doc["services"].items():
        if not isinstance(service, Mapping):
            continue
        wanted = service.get("profiles") or []
        if isinstance(wanted, str):  # `profiles: dev` is one profile, not three letters
            wanted = [wanted]
        if wanted and not set(wanted) & set(profiles):
            notes.append(
                f"{source}: service {name!r} skipped: only starts with profile(s) "
                f"{', '.join(map(str, wanted))} (pass --profile to include it)"
            )
            continue
        workload = _service(str(name), service, source=source, host_gpus=host_gpus)
        if workload is not None:
            workloads.append(workload)
    return workloads, notes


def _service(
    name: str, service: Mapping[str, Any], *, source: str, host_gpus: Sequence[str] | None
) -> Workload | None:
    env, unresolved = _environment(service.get("environment"))
    if service.get("env_file"):
        unresolved.append(
            Unresolved(
                "env_file",
                f"env_file {service['env_file']!r} is not read: variables set only there "
                "(caps, visible devices) are unknown to the plan",
            )
        )
    gpus = _gpus(name, service, env, unresolved, host_gpus)
    if gpus is None:
        return None
    replicas, processes = _counts(service, unresolved)
    return Workload(
        who=name,
        source=source,
        replicas=replicas,
        gpus=gpus,
        env=env,
        unresolved=unresolved,
        processes=processes,
        fix_hint=f"services.{name}.environment",
    )


def _environment(raw: object) -> tuple[dict[str, str], list[Unresolved]]:
    """Compose's `environment` as a dict of known values, plus what is unknown."""
    pairs: list[tuple[str, object]] = []
    if isinstance(raw, Mapping):
        pairs = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            key, sep, text = str(item).partition("=")
            pairs.append((key, text if sep else None))
    env: dict[str, str] = {}
    unresolved: list[Unresolved] = []
    for key, value in pairs:
        if not envvars.relevant(key):
            continue
        if value is None:
            unresolved.append(Unresolved(key, "its value is taken from the shell running compose"))
            continue
        text = envvars.scalar_text(value)
        if envvars.compose_interpolated(text):
            unresolved.append(Unresolved(key, f"{text!r} is interpolated from the shell"))
            continue
        env[key] = text.replace("$$", "$")
    return env, unresolved


def _gpus(
    name: str,
    service: Mapping[str, Any],
    env: Mapping[str, str],
    unresolved: list[Unresolved],
    host_gpus: Sequence[str] | None,
) -> GpuRequest | None:
    """The GPUs the service's processes see; None when it sees none."""
    requests = _device_requests(service)
    if requests:
        ids: list[str] = []
        for request in requests:
            resolved = _request_ids(request, host_gpus)
            if isinstance(resolved, str):
                return GpuRequest(Placement.UNKNOWN, reason=resolved)
            ids.extend(gpu for gpu in resolved if gpu not in ids)
    elif "NVIDIA_VISIBLE_DEVICES" in env:
        listed = devices.nvidia_visible(env["NVIDIA_VISIBLE_DEVICES"], host_gpus)
        if listed is None:
            return GpuRequest(
                Placement.UNKNOWN, reason=_NEEDS_COUNT.format("NVIDIA_VISIBLE_DEVICES=all")
            )
        ids = listed
    elif any(u.what == "NVIDIA_VISIBLE_DEVICES" for u in unresolved):
        return GpuRequest(Placement.UNKNOWN, reason="NVIDIA_VISIBLE_DEVICES is not known")
    else:
        return None
    if any(u.what == "CUDA_VISIBLE_DEVICES" for u in unresolved):
        return GpuRequest(Placement.UNKNOWN, reason="CUDA_VISIBLE_DEVICES is not known")
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = devices.cuda_visible(env["CUDA_VISIBLE_DEVICES"], _container_order(ids))
    if not ids:
        return None
    return GpuRequest(Placement.HOST, host_gpus=tuple(ids))


_NEEDS_COUNT = (
    "{} needs the number of GPUs on the host: pass --gpu-count N "
    "(or run plan where NVML sees the GPUs)"
)


def _device_requests(service: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """GPU device requests from `deploy.resources.reservations.devices` and `gpus:`."""
    found: list[Mapping[str, Any]] = []
    deploy = service.get("deploy") or {}
    reserved = ((deploy.get("resources") or {}).get("reservations") or {}).get("devices") or []
    for request in reserved:
        if isinstance(request, Mapping) and _is_gpu(request):
            found.append(request)
    gpus = service.get("gpus")
    if gpus == "all":
        found.append({"count": "all"})
    elif isinstance(gpus, list):
        found.extend(r for r in gpus if isinstance(r, Mapping))
    return found


def _is_gpu(request: Mapping[str, Any]) -> bool:
    capabilities = request.get("capabilities") or []
    return "gpu" in capabilities or request.get("driver") == "nvidia"


def _request_ids(request: Mapping[str, Any], host_gpus: Sequence[str] | None) -> list[str] | str:
    """Host GPU ids of one device request, or why they cannot be known."""
    ids = request.get("device_ids")
    count = request.get("count", "all" if ids is None else None)
    if ids is not None:
        texts = [str(i) for i in ids]
        if any(envvars.compose_interpolated(t) for t in texts):
            return f"device_ids {texts} are interpolated from the shell"
        return texts
    # -1 is Docker's spelling of "all" (compose's `count: -1`): before the integer branch
    if str(count) == "all" or (count == -1 and not isinstance(count, bool)):
        if host_gpus is None:
            return _NEEDS_COUNT.format("count: all")
        return list(host_gpus)
    if isinstance(count, int) and not isinstance(count, bool):
        return devices.first_n(count, host_gpus)
    return f"device count {count!r} is not a number or 'all'"


def _container_order(ids: list[str]) -> list[str]:
    """Inside the container, CUDA numbers the GPUs it was given from 0, in host order."""
    if all(is_ascii_number(i) for i in ids):
        return sorted(ids, key=int)
    return ids


def _counts(service: Mapping[str, Any], unresolved: list[Unresolved]) -> tuple[int, int]:
    """(replicas, TensorFlow processes per replica)."""
    deploy = service.get("deploy") or {}
    raw = deploy.get("replicas", service.get("scale", 1))
    replicas = _positive(raw, "replicas", unresolved)
    labels = service.get("labels") or {}
    if isinstance(labels, list):
        labels = dict(str(item).partition("=")[::2] for item in labels)
    processes = _positive(labels.get(PROCESSES_LABEL, 1), PROCESSES_LABEL, unresolved)
    return replicas, processes


def _positive(raw: object, what: str, unresolved: list[Unresolved]) -> int:
    text = envvars.scalar_text(raw)
    if is_ascii_number(text):
        return int(text)
    unresolved.append(Unresolved(what, f"{text!r} is not a whole number; counted as 1"))
    return 1

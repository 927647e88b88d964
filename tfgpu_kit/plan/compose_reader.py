"""Read a compose file into Workloads: one per service that sees a GPU.

Understood: `deploy.resources.reservations.devices` and the service-level `gpus:`
(`device_ids`, `count`, `count: all`), `NVIDIA_VISIBLE_DEVICES` (with the nvidia
runtime), `CUDA_VISIBLE_DEVICES`, `deploy.replicas`/`scale`, `profiles`, and the
label `io.tfgpu.processes` (TensorFlow processes per container, default 1).
Not resolved but reported: `${VAR}` interpolation and `env_file`, whose values
come from outside the file.

What Compose or Docker refuses is refused here, with the rule's source:
- the compose-spec schema (compose-spec/compose-spec schema/compose-spec.json @ b2835e8a):
  `services` maps names matching `^[a-zA-Z0-9._-]+$` to mappings; `environment` and `labels` are
  `list_or_dict` (values: string, number, boolean, null; list items: strings); `device_ids` and
  `profiles` are `list_of_strings` (unique); `count` is a string or an integer; `gpus` is "all" or
  a list of mappings;
- compose-go (compose-spec/compose-go types/device.go @ 01608cf3, DeviceRequest): `count` and
  `device_ids` are exclusive, `capabilities` is mandatory in `deploy…devices`, a count string is
  "all" (any case) or an integer, no count means all;
- moby (moby/moby daemon/nvidia_linux.go @ 5c487368, setNvidiaGPUs): Count and DeviceIDs
  together are refused ("cannot set both Count and DeviceIDs on device request"), a negative
  count gives all GPUs, a positive one the first N (countToDevices)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfgpu.contract.settings import is_ascii_number

from tfgpu_kit.plan import devices, envvars
from tfgpu_kit.plan.fields import (
    count_of,
    is_scalar,
    is_whole,
    mapping,
    refuse,
    scalar,
    sequence,
    text,
    texts,
)
from tfgpu_kit.plan.model import GpuRequest, Placement, Unresolved, Workload
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.yamlfile import shown

PROCESSES_LABEL = "io.tfgpu.processes"
# compose-spec.json: properties.services.patternProperties
SERVICE_NAME = re.compile(r"[a-zA-Z0-9._-]+", re.ASCII)
# compose-go DeviceCount: strconv.ParseInt(v, 10, 64) after "all"
_GO_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_ENV_EXAMPLE = "environment: {TF_GPU_MEM_LIMIT: 6GiB} or environment: [TF_GPU_MEM_LIMIT=6GiB]"
_LIST_OR_DICT = " (compose-spec list_or_dict)"
_DEVICE_EXAMPLE = "devices: [{driver: nvidia, capabilities: [gpu], device_ids: ['0']}]"


def is_compose(doc: object) -> bool:
    return isinstance(doc, Mapping) and isinstance(doc.get("services"), Mapping)


@dataclass
class Read:
    workloads: list[Workload] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    profiles: set[str] = field(default_factory=set)  # every profile a service names


def read(
    doc: Mapping[str, Any],
    *,
    source: str,
    host_gpus: Sequence[str] | None,
    profiles: Sequence[str] = (),
) -> Read:
    out = Read()
    for name, service in doc["services"].items():
        if not isinstance(name, str) or not SERVICE_NAME.fullmatch(name):
            raise refuse(
                source,
                "a service name",
                name,
                "letters, digits, '.', '_' and '-' (compose-spec)",
                "text-model",
            )
        where = f"services.{name}"
        if not isinstance(service, Mapping):
            raise refuse(
                source,
                where,
                service,
                "a mapping (compose-spec: a service is a mapping)",
                f"services: {{{name}: {{image: tfgpu/tensorflow:2.21.0-gpu}}}}",
            )
        wanted = _string_list(
            source, f"{where}.profiles", service.get("profiles"), "profiles: [debug]"
        )
        out.profiles.update(wanted)
        # read (and so checked) even when skipped: Compose validates the whole file
        workload = _service(name, service, source=source, host_gpus=host_gpus)
        if wanted and not set(wanted) & set(profiles):
            out.notes.append(
                f"{shown(source)}: service '{name}' skipped: only starts with profile(s) "
                f"{', '.join(shown(p) for p in wanted)} (pass --profile to include it)"
            )
            continue
        if workload is not None:
            out.workloads.append(workload)
    return out


def _string_list(source: str, where: str, raw: object, example: str) -> list[str]:
    """`profiles`, `capabilities`: a string is one item (compose-go's StringList), not its
    letters."""
    return [raw] if isinstance(raw, str) else texts(source, where, raw, example)


def _service(
    name: str, service: Mapping[str, Any], *, source: str, host_gpus: Sequence[str] | None
) -> Workload | None:
    where = f"services.{name}"
    env, unresolved = _environment(source, f"{where}.environment", service.get("environment"))
    env_file = service.get("env_file")
    if env_file is not None:
        files = _env_files(source, where, env_file)
        if env_file:
            unresolved.append(
                Unresolved(
                    "env_file",
                    f"env_file {files} is not read: variables set only there (caps, visible "
                    "devices) are unknown to the plan",
                )
            )
    gpus = _gpus(source, where, service, env, unresolved, host_gpus)
    # checked for every service, as Compose checks the whole file
    replicas, processes = _counts(source, where, service, unresolved)
    if gpus is None:
        if not env:
            return None  # nothing of the kit's: not a TensorFlow service of ours
        gpus = GpuRequest(Placement.NONE)  # checked for what the runtime refuses
    return Workload(
        who=name,
        source=source,
        replicas=replicas,
        gpus=gpus,
        env=env,
        unresolved=unresolved,
        processes=processes,
        fix_hint=f"{where}.environment",
    )


def _env_files(source: str, where: str, raw: object) -> str:
    """compose-spec `env_file`: a path, or a list of paths or {path: …} mappings."""
    if isinstance(raw, str):
        return f"'{shown(raw)}'"
    paths = []
    for item in sequence(source, f"{where}.env_file", raw, "env_file: .env"):
        if not isinstance(item, str):
            item = mapping(source, f"{where}.env_file[]", item, "env_file: [{path: .env}]")
            item = item.get("path")
        paths.append(f"'{shown(text(source, f'{where}.env_file[].path', item, 'path: .env'))}'")
    return ", ".join(paths) if len(paths) <= 3 else f"({len(paths)} files)"


def _environment(source: str, where: str, raw: object) -> tuple[dict[str, str], list[Unresolved]]:
    """Compose's `environment` (list_or_dict) as a dict of known values, plus what is unknown."""
    pairs: list[tuple[str, object]] = []
    if isinstance(raw, list):
        for item in raw:
            key, sep, value = text(source, f"{where}[]", item, _ENV_EXAMPLE).partition("=")
            pairs.append((key, value if sep else None))
    else:
        for key, value in mapping(source, where, raw, _ENV_EXAMPLE).items():
            name = text(source, f"{where} key", key, _ENV_EXAMPLE)
            checked = scalar(source, f"{where}.{shown(name)}", value, _ENV_EXAMPLE, _LIST_OR_DICT)
            pairs.append((name, checked))
    env: dict[str, str] = {}
    unresolved: list[Unresolved] = []
    # a name given twice: the last one counts, as in Compose
    for key, raw in dict(pairs).items():
        if not envvars.relevant(key):
            continue
        if raw is None:
            unresolved.append(Unresolved(key, "its value is taken from the shell running compose"))
            continue
        value_text = envvars.scalar_text(raw)
        if envvars.compose_interpolated(value_text):
            unresolved.append(
                Unresolved(key, f"'{shown(value_text)}' is interpolated from the shell")
            )
            continue
        env[key] = value_text.replace("$$", "$")
    return env, unresolved


def _gpus(
    source: str,
    where: str,
    service: Mapping[str, Any],
    env: Mapping[str, str],
    unresolved: list[Unresolved],
    host_gpus: Sequence[str] | None,
) -> GpuRequest | None:
    requests = _device_requests(source, where, service)
    if requests:
        ids: list[str] = []
        # every request is checked before the first that cannot be placed decides
        resolved = [_request_ids(source, w, request, host_gpus) for w, request in requests]
        for each in resolved:
            if isinstance(each, GpuRequest):
                return each
            ids.extend(gpu for gpu in each if gpu not in ids)
    elif "NVIDIA_VISIBLE_DEVICES" in env:
        listed = devices.nvidia_visible(env["NVIDIA_VISIBLE_DEVICES"], host_gpus)
        if listed is None:
            return _needs_count("NVIDIA_VISIBLE_DEVICES=all")
        if isinstance(listed, str):
            return GpuRequest(Placement.REFUSED, reason=listed)
        ids = listed
    elif any(u.what == "NVIDIA_VISIBLE_DEVICES" for u in unresolved):
        return GpuRequest(Placement.UNKNOWN, reason="NVIDIA_VISIBLE_DEVICES is not known")
    else:
        return None
    missing = devices.beyond_host(ids, host_gpus)
    if missing is not None:
        return GpuRequest(Placement.REFUSED, reason=_no_such_gpu(missing, host_gpus))
    if any(u.what == "CUDA_VISIBLE_DEVICES" for u in unresolved):
        return GpuRequest(Placement.UNKNOWN, reason="CUDA_VISIBLE_DEVICES is not known")
    if "CUDA_VISIBLE_DEVICES" in env:
        ids = devices.cuda_visible(env["CUDA_VISIBLE_DEVICES"], _container_order(ids))
    if not ids:
        return None
    return GpuRequest(Placement.HOST, host_gpus=tuple(ids))


def _needs_count(what: str) -> GpuRequest:
    return GpuRequest(
        Placement.UNKNOWN,
        reason=f"{what} needs the number of GPUs on the host: pass --gpu-count N "
        "(or run plan where NVML sees the GPUs)",
    )


def _no_such_gpu(gpu: str, host_gpus: Sequence[str] | None) -> str:
    have = (
        f"the host has {len(host_gpus)} (--gpu-count or NVML)"
        if host_gpus is not None
        else f"plan takes at most {devices.MAX_GPUS} per host"
    )
    return f"GPU {gpu} does not exist: {have}; the container would not start"


def _device_requests(
    source: str, where: str, service: Mapping[str, Any]
) -> list[tuple[str, Mapping[str, Any]]]:
    """GPU device requests from `deploy.resources.reservations.devices` and `gpus:`."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    path = f"{where}.deploy"
    deploy = mapping(source, path, service.get("deploy"), "deploy: {replicas: 2}")
    resources = mapping(source, f"{path}.resources", deploy.get("resources"), "resources: {}")
    path += ".resources.reservations"
    reserved = mapping(source, path, resources.get("reservations"), "reservations: {}")
    path += ".devices"
    requests = sequence(source, path, reserved.get("devices"), _DEVICE_EXAMPLE)
    for index, request in enumerate(requests):
        item = f"{path}[{index}]"
        request = mapping(source, item, request, _DEVICE_EXAMPLE)
        if "capabilities" not in request:
            raise refuse(
                source,
                f"{item}.capabilities",
                None,
                "a list of capabilities: compose-go requires it in a device request",
                "capabilities: [gpu]",
            )
        if _is_gpu(source, item, request):
            found.append((item, request))
    gpus = service.get("gpus")
    if gpus is None:
        return found
    if isinstance(gpus, str):
        if gpus != "all":
            raise refuse(
                source, f"{where}.gpus", gpus, "'all' or a list of device requests", "gpus: all"
            )
        found.append((f"{where}.gpus", {"count": "all"}))
        return found
    for index, request in enumerate(sequence(source, f"{where}.gpus", gpus, "gpus: all")):
        item = f"{where}.gpus[{index}]"
        if not isinstance(request, Mapping):  # null too: compose-spec items are objects
            raise refuse(source, item, request, "a mapping", "gpus: [{device_ids: ['0']}]")
        found.append((item, request))
    return found


def _is_gpu(source: str, where: str, request: Mapping[str, Any]) -> bool:
    raw = request["capabilities"]
    capabilities = _string_list(source, f"{where}.capabilities", raw, "capabilities: [gpu]")
    driver = request.get("driver")
    if driver is not None:
        text(source, f"{where}.driver", driver, "driver: nvidia")
    return "gpu" in capabilities or driver == "nvidia"


def _request_ids(
    source: str, where: str, request: Mapping[str, Any], host_gpus: Sequence[str] | None
) -> list[str] | GpuRequest:
    """Host GPU ids of one device request, or a GpuRequest saying why they cannot be known or
    why the container would not start."""
    if "count" in request and "device_ids" in request:
        raise UsageError(
            f"{shown(source)}: {shown(where)} has both count and device_ids: accepted: one of them "
            "(compose-go: they are exclusive; Docker: cannot set both Count and DeviceIDs on "
            "device request); example: device_ids: ['0', '1'] (or count: 2)"
        )
    if "device_ids" in request:
        return _device_ids(source, f"{where}.device_ids", request["device_ids"])
    count = _count(source, f"{where}.count", request.get("count", "all"))
    if isinstance(count, GpuRequest):
        return count
    if count < 0:  # moby: a negative count is NVIDIA_VISIBLE_DEVICES=all
        if host_gpus is None:
            return _needs_count("count: all")
        return list(host_gpus)
    chosen = devices.first_n(count, host_gpus)
    if isinstance(chosen, str):
        return GpuRequest(Placement.REFUSED, reason=chosen)
    return chosen


def _device_ids(source: str, where: str, raw: object) -> list[str] | GpuRequest:
    example = "device_ids: ['0', '1']"
    ids = texts(source, where, raw, example)
    if any(envvars.compose_interpolated(gpu) for gpu in ids):
        return GpuRequest(Placement.UNKNOWN, reason=f"{where} is interpolated from the shell")
    for gpu in ids:
        if not devices.valid_id(gpu):
            raise refuse(source, f"{where}[]", gpu, devices.ID_ACCEPTED, example)
    if len(set(ids)) != len(ids):
        raise refuse(source, where, ids, "each GPU once (compose-spec: unique items)", example)
    return ids


def _count(source: str, where: str, raw: object) -> int | GpuRequest:
    """A device count as compose-go reads it: an integer, or a string "all" (-1) or integer."""
    accepted = "a whole number of GPUs or 'all' (compose-go DeviceCount)"
    if isinstance(raw, str):
        if raw.lower() == "all":
            return -1
        if envvars.compose_interpolated(raw):
            return GpuRequest(Placement.UNKNOWN, reason=f"{where} is interpolated from the shell")
        if _GO_INT.fullmatch(raw) and len(raw) <= 4000:  # int() stops at 4300 digits
            raw = int(raw)
    if not is_whole(raw):
        raise refuse(source, where, raw, accepted, "count: 1")
    if raw.bit_length() > 63:  # compose-go: int64
        raise refuse(source, where, raw, accepted + ", within 64 bits", "count: 1")
    return raw


def _container_order(ids: list[str]) -> list[str]:
    """Inside the container, CUDA numbers the GPUs it was given from 0, in host order."""
    if all(is_ascii_number(i) for i in ids):
        return sorted(ids, key=lambda gpu: (len(gpu.lstrip("0")), gpu.lstrip("0")))
    return ids


def _counts(
    source: str, where: str, service: Mapping[str, Any], unresolved: list[Unresolved]
) -> tuple[int, int]:
    """(replicas, TensorFlow processes per replica)."""
    deploy = mapping(source, f"{where}.deploy", service.get("deploy"), "deploy: {replicas: 2}")
    raw = deploy.get("replicas", service.get("scale", 1))
    replicas = _positive(source, f"{where}.deploy.replicas", raw, "replicas", unresolved)
    labels_where = f"{where}.labels"
    raw_labels = service.get("labels")
    labels: dict[str, object] = {}
    if isinstance(raw_labels, list):
        for item in raw_labels:
            key, _, value = text(source, f"{labels_where}[]", item, "labels: [a=b]").partition("=")
            labels[key] = value
    else:
        for key, value in mapping(source, labels_where, raw_labels, "labels: {a: b}").items():
            example = "labels: {io.tfgpu.processes: '4'}"
            checked = scalar(source, f"{labels_where} value", value, example)  # before the key
            labels[text(source, f"{labels_where} key", key, "labels: {a: b}")] = checked
    processes = _positive(
        source,
        f"{labels_where}.{PROCESSES_LABEL}",
        labels.get(PROCESSES_LABEL, 1),
        PROCESSES_LABEL,
        unresolved,
    )
    return replicas, processes


def _positive(source: str, where: str, raw: object, what: str, unresolved: list[Unresolved]) -> int:
    """A count compose takes as an integer or a string of one (compose-spec: integer or string);
    anything else is reported and counted as 1."""
    if not is_scalar(raw):
        raise refuse(source, where, raw, "a whole number", "2")
    return count_of(envvars.scalar_text(raw), raw, what, unresolved)

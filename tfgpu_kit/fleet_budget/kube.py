"""Read Kubernetes manifests into Workloads: one per container that gets GPUs.

Pod templates of Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and
CronJob. GPUs come from the NVIDIA device plugin (`nvidia.com/gpu` limits), whole
and exclusive unless the plugin's time-slicing config (a ConfigMap in the input,
or --time-slicing) advertises each GPU as several replicas. Environment values
are resolved from `value`, and from ConfigMaps in the input (`configMapKeyRef`,
`envFrom.configMapRef`); Secrets, field references and `$(VAR)` expansions are
reported as unknown."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from tfgpu.settings import is_ascii_number

from tfgpu_kit.fleet_budget import envvars
from tfgpu_kit.fleet_budget.model import GpuRequest, Placement, Unresolved, Workload

GPU_RESOURCE_PREFIX = "nvidia.com/gpu"
PROCESSES_ANNOTATION = "tfgpu.io/processes"
_TEMPLATED = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")


def is_manifest(doc: object) -> bool:
    return isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc


@dataclass
class Cluster:
    """What one set of manifests says about the cluster, beyond the pods."""

    config_maps: dict[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)
    slices: dict[str, int] = field(default_factory=dict)  # advertised resource → replicas per GPU
    notes: list[str] = field(default_factory=list)


def flatten(docs: Iterable[object]) -> list[Mapping[str, Any]]:
    """Manifests, with `kind: List` expanded and empty documents dropped."""
    out: list[Mapping[str, Any]] = []
    for doc in docs:
        if is_manifest(doc):
            assert isinstance(doc, Mapping)
            if doc["kind"] == "List":
                out.extend(flatten(doc.get("items") or []))
            else:
                out.append(doc)
    return out


def survey(manifests: Iterable[Mapping[str, Any]], *, source: str, cluster: Cluster) -> None:
    """Collect ConfigMaps and any device-plugin time-slicing config into `cluster`."""
    for doc in manifests:
        if doc["kind"] != "ConfigMap":
            continue
        meta = doc.get("metadata") or {}
        data = {str(k): str(v) for k, v in (doc.get("data") or {}).items()}
        cluster.config_maps[(_namespace(meta), str(meta.get("name")))] = data
        for key, text in data.items():
            for resource, replicas in _time_slicing(text).items():
                known = cluster.slices.get(resource)
                if known is not None and known != replicas:
                    cluster.notes.append(
                        f"{source}: time-slicing for {resource} differs between node configs "
                        f"({known} and {replicas} per GPU); the plan assumes the larger"
                    )
                cluster.slices[resource] = max(replicas, known or 0)
                cluster.notes.append(
                    f"{source}: ConfigMap {meta.get('name')}[{key}] shares each GPU as "
                    f"{replicas} × {resource} (device-plugin time-slicing)"
                )


def _time_slicing(text: str) -> dict[str, int]:
    """`sharing.timeSlicing.resources[]` of an NVIDIA device-plugin config, keyed by the
    resource name pods request (`<name>.shared` when renamed by default)."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(config, Mapping):
        return {}
    slicing = (config.get("sharing") or {}).get("timeSlicing") or {}
    if not isinstance(slicing, Mapping):
        return {}
    rename_all = bool(slicing.get("renameByDefault"))
    found: dict[str, int] = {}
    for entry in slicing.get("resources") or []:
        if not isinstance(entry, Mapping) or not is_ascii_number(str(entry.get("replicas", ""))):
            continue
        name = str(entry.get("rename") or entry.get("name"))
        if rename_all and not entry.get("rename"):
            name += ".shared"
        found[name] = int(entry["replicas"])
    return found


def read(
    manifests: Iterable[Mapping[str, Any]], *, source: str, cluster: Cluster
) -> list[Workload]:
    workloads: list[Workload] = []
    for doc in manifests:
        found = _pod_template(doc)
        if found is None:
            continue
        template, replicas, unresolved_replicas = found
        kind, name = doc["kind"], (doc.get("metadata") or {}).get("name", "?")
        meta = template.get("metadata") or {}
        namespace = _namespace(doc.get("metadata") or {})
        spec = template.get("spec") or {}
        containers = list(spec.get("containers") or [])
        # Sidecars (init containers that keep running) run beside the main containers.
        containers += [
            c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
        ]
        annotations = meta.get("annotations") or {}
        for container in containers:
            workload = _container(
                container,
                who=f"{kind}/{name}[{container.get('name', '?')}]",
                source=source,
                namespace=namespace,
                cluster=cluster,
            )
            if workload is None:
                continue
            workload.replicas = replicas
            if unresolved_replicas:
                workload.unresolved.append(unresolved_replicas)
            if kind == "DaemonSet":
                workload.notes.append("a DaemonSet runs one pod per node; counted once per node")
            processes = envvars.scalar_text(annotations.get(PROCESSES_ANNOTATION, 1))
            if is_ascii_number(processes):
                workload.processes = int(processes)
            else:
                workload.unresolved.append(
                    Unresolved(
                        PROCESSES_ANNOTATION, f"{processes!r} is not a whole number; counted as 1"
                    )
                )
            workloads.append(workload)
    return workloads


def _namespace(meta: Mapping[str, Any]) -> str:
    return str(meta.get("namespace") or "default")


def _pod_template(
    doc: Mapping[str, Any],
) -> tuple[Mapping[str, Any], int, Unresolved | None] | None:
    """(pod template, concurrent pods, why the count is unknown) for workload kinds."""
    kind, spec = doc["kind"], doc.get("spec") or {}
    if kind == "Pod":
        return {"metadata": doc.get("metadata") or {}, "spec": spec}, 1, None
    if kind == "CronJob":
        job = (spec.get("jobTemplate") or {}).get("spec") or {}
        return _job(job)
    if kind == "Job":
        return _job(spec)
    if kind in _TEMPLATED:
        template = spec.get("template") or {}
        if kind == "DaemonSet":
            return template, 1, None
        replicas, unresolved = _count("replicas", spec.get("replicas", 1))
        return template, replicas, unresolved
    return None


def _count(what: str, raw: object) -> tuple[int, Unresolved | None]:
    """A pod count as Kubernetes takes it: a whole number ≥ 0 (YAML `true` is not one); else
    1, and why the count is unknown."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw, None
    text = envvars.scalar_text(raw)
    return 1, Unresolved(what, f"{text!r} is not a whole number ≥ 0; counted as 1")


def _job(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], int, Unresolved | None]:
    """A Job runs min(parallelism, completions) pods at once (both default to 1)."""
    template = spec.get("template") or {}
    parallelism, unresolved = _count("parallelism", spec.get("parallelism", 1))
    if unresolved is not None:
        return template, parallelism, unresolved
    if spec.get("completions") is not None:  # null: unset, as Kubernetes defaults it
        completions, unresolved = _count("completions", spec["completions"])
        if unresolved is not None:
            return template, parallelism, unresolved
        parallelism = min(parallelism, completions)
    return template, parallelism, None


def _container(
    container: Mapping[str, Any], *, who: str, source: str, namespace: str, cluster: Cluster
) -> Workload | None:
    env, unresolved = _environment(container, namespace, cluster)
    gpus = _gpus(container, env, cluster)
    if gpus is None:
        return None
    return Workload(
        who=who,
        source=source,
        replicas=1,
        gpus=gpus,
        env=env,
        unresolved=unresolved,
        fix_hint=f"{who.split('[')[0]} container {container.get('name', '?')!r}: env",
    )


def _gpus(
    container: Mapping[str, Any], env: Mapping[str, str], cluster: Cluster
) -> GpuRequest | None:
    resources = container.get("resources") or {}
    # Extended resources must be set in limits; requests, if present, must equal them.
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    for resource, amount in amounts.items():
        if not str(resource).startswith(GPU_RESOURCE_PREFIX):
            continue
        count = int(str(amount)) if is_ascii_number(str(amount)) else 0
        if count == 0:
            continue
        replicas = cluster.slices.get(str(resource), 1)
        if replicas > 1:
            return GpuRequest(
                Placement.TIME_SLICED, count=count, resource=str(resource), slices_per_gpu=replicas
            )
        return GpuRequest(Placement.EXCLUSIVE, count=count, resource=str(resource))
    visible = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if visible and visible not in ("none", "void"):
        return GpuRequest(
            Placement.UNKNOWN,
            reason=(
                f"NVIDIA_VISIBLE_DEVICES={visible} without a {GPU_RESOURCE_PREFIX} limit: the "
                "device plugin does not account for these GPUs, so who shares them is unknown"
            ),
        )
    return None


def _environment(
    container: Mapping[str, Any], namespace: str, cluster: Cluster
) -> tuple[dict[str, str], list[Unresolved]]:
    """Known values of the relevant variables, and what is unknown. `env` wins over
    `envFrom`, as in Kubernetes."""
    env: dict[str, str] = {}
    unresolved: list[Unresolved] = []
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        ref = source.get("configMapRef")
        data = cluster.config_maps.get((namespace, str((ref or {}).get("name"))))
        if ref is not None and data is not None:
            env.update({prefix + k: v for k, v in data.items() if envvars.relevant(prefix + k)})
        else:
            what = "secretRef" if "secretRef" in source else "configMapRef"
            name = (source.get(what) or {}).get("name")
            unresolved.append(
                Unresolved(
                    "envFrom",
                    f"{what} {name!r} is not in the input: variables set only there are unknown",
                )
            )
    for item in container.get("env") or []:
        name = str(item.get("name"))
        if not envvars.relevant(name):
            continue
        env.pop(name, None)
        if "value" in item or "valueFrom" not in item:
            value = envvars.scalar_text(item.get("value", ""))
            if envvars.kube_interpolated(value):
                unresolved.append(Unresolved(name, f"{value!r} expands $(…) at run time"))
            else:
                env[name] = value.replace("$$(", "$(")
            continue
        source = item["valueFrom"] or {}
        ref = source.get("configMapKeyRef")
        data = cluster.config_maps.get((namespace, str((ref or {}).get("name"))))
        if ref is not None and data is not None and str(ref.get("key")) in data:
            env[name] = data[str(ref["key"])]
        else:
            kinds = ", ".join(sorted(source)) or "valueFrom"
            unresolved.append(Unresolved(name, f"comes from {kinds}, which is not in the input"))
    return env, unresolved

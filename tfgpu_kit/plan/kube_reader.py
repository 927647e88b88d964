"""Read Kubernetes manifests into Workloads: one per container that gets GPUs.

Pod templates of Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job and
CronJob. GPUs come from the NVIDIA device plugin (`nvidia.com/gpu` limits), whole
and exclusive unless the plugin's time-slicing config (a ConfigMap in the input,
or --time-slicing) advertises each GPU as several replicas. Environment values
are resolved from `value`, and from ConfigMaps in the input (`configMapKeyRef`,
`envFrom.configMapRef`); Secrets, field references and `$(VAR)` expansions are
reported as unknown.

What the API server refuses is refused here (kubernetes/kubernetes
pkg/apis/core/validation/validation.go @ a7264f95, ValidateResourceRequirements and
ValidateResourceQuantityValue): an `nvidia.com/gpu` amount is a quantity
(staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go @ 143ac994) that is a whole number
≥ 0; a request needs a limit ("Limit must be set for non overcommitable resources") and must equal
it. ConfigMap data, annotations and `env[].value` are strings (map[string]string and string in
the API types), counts are int32. A `kind: List` is expanded to at most MAX_OBJECTS objects and
MAX_LIST_DEPTH nested lists."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeGuard

import yaml

from tfgpu_kit.plan import devices, envvars
from tfgpu_kit.plan.fields import (
    MAX_COUNT,
    count_of,
    is_whole,
    mapping,
    mappings,
    quoted,
    refuse,
    sequence,
    text,
)
from tfgpu_kit.plan.model import GpuRequest, Placement, Unresolved, Workload
from tfgpu_kit.shared import kube_quantity
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.flag_values import duration_text
from tfgpu_kit.shared.yamlfile import YamlLimitError, load_text, shown

GPU_RESOURCE_PREFIX = "nvidia.com/gpu"
PROCESSES_ANNOTATION = "tfgpu.io/processes"
# Kueue's LocalQueue of a workload (kueue.sigs.k8s.io, "Run A Kubernetes Job"): read to say which
# workloads wait for admission; the plan budgets them as if all were admitted at once
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_TEMPLATED = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")
MAX_OBJECTS = 10_000  # objects per input file, `kind: List` items included
MAX_LIST_DEPTH = 8  # a List inside a List inside …
MAX_INT64 = 2**63 - 1  # a Job's activeDeadlineSeconds (k8s.io/api batch/v1 JobSpec: *int64)
FROM_JOBSET = "tfgpu.io/from-jobset"  # marks a Job read from a JobSet (no field of an object)


def is_manifest(doc: object) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc


@dataclass
class Cluster:
    """What one set of manifests says about the cluster, beyond the pods."""

    config_maps: dict[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)
    slices: dict[str, int] = field(default_factory=dict)  # advertised resource → replicas per GPU
    notes: list[str] = field(default_factory=list)


def flatten(docs: Iterable[object], source: str = "") -> list[Mapping[str, Any]]:
    """Manifests, with `kind: List` expanded (iteratively, bounded in count and nesting) and
    empty documents dropped."""
    out: list[Mapping[str, Any]] = []
    others: list[object] = []  # documents that are no Kubernetes object
    stack: list[tuple[object, int]] = [(doc, 0) for doc in reversed(list(docs))]
    while stack:
        doc, depth = stack.pop()
        if not is_manifest(doc):
            if depth:
                raise refuse(
                    source,
                    "an item of a kind: List",
                    doc,
                    "a Kubernetes object (apiVersion, kind)",
                    "items: [{apiVersion: v1, kind: Pod, …}]",
                )
            others.append(doc)
            continue
        kind = text(source, "kind", doc["kind"], "kind: Deployment")
        text(source, f"{shown(kind)} apiVersion", doc["apiVersion"], "apiVersion: apps/v1")
        if kind != "List":
            out.append(doc)
            if len(out) > MAX_OBJECTS:
                raise UsageError(
                    f"{shown(source)}: more than {MAX_OBJECTS:,} Kubernetes objects: accepted: "
                    f"at most {MAX_OBJECTS:,} per file; example: split the file"
                )
            continue
        if depth >= MAX_LIST_DEPTH:
            raise UsageError(
                f"{shown(source)}: a kind: List nested {depth + 1} deep: accepted: at most "
                f"{MAX_LIST_DEPTH}; example: one kind: List with the objects as its items"
            )
        items = sequence(source, "List items", doc.get("items"), "items: [{kind: Pod, …}]")
        if len(items) > MAX_OBJECTS:
            raise UsageError(
                f"{shown(source)}: a kind: List of {len(items):,} items: accepted: at most "
                f"{MAX_OBJECTS:,} objects per file; example: split the file"
            )
        stack.extend((item, depth + 1) for item in reversed(items))
    if out and others:
        # kubectl refuses such a document ("Object 'Kind' is missing"); dropping it would hide,
        # say, a compose file pasted into a manifest set
        raise refuse(
            source,
            "a document among the Kubernetes objects",
            others[0],
            "a Kubernetes object (apiVersion, kind) in every document",
            "apiVersion: v1 and kind: ConfigMap at the top of each document",
        )
    return out


def _metadata(source: str, doc: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    kind = doc["kind"]
    meta = mapping(source, f"{kind} metadata", doc.get("metadata"), "metadata: {name: x}")
    name = text(
        source, f"{shown(kind)} metadata.name", meta.get("name", "?"), "metadata: {name: serve}"
    )
    return meta, name


def survey(manifests: Iterable[Mapping[str, Any]], *, source: str, cluster: Cluster) -> None:
    """Collect ConfigMaps and any device-plugin time-slicing config into `cluster`."""
    for doc in manifests:
        if doc["kind"] != "ConfigMap":
            continue
        meta, name = _metadata(source, doc)
        where = f"ConfigMap {shown(name)} data"
        data: dict[str, str] = {}
        example = "data: {TF_GPU_MEM_LIMIT: '6GiB'} (ConfigMap data values are strings)"
        for key, value in mapping(source, where, doc.get("data"), "data: {key: value}").items():
            checked = text(source, f"{where}.{shown(str(key))}", value, example)  # before the key
            data[text(source, f"{where} key", key, "data: {key: value}")] = checked
        cluster.config_maps[(_namespace(source, meta), name)] = data
        for key, config in data.items():
            for resource, replicas in _time_slicing(config).items():
                known = cluster.slices.get(resource)
                if known is not None and known != replicas:
                    cluster.notes.append(
                        f"{shown(source)}: time-slicing for {shown(resource)} differs between node "
                        f"configs ({known} and {replicas} per GPU); the plan assumes the larger"
                    )
                cluster.slices[resource] = max(replicas, known or 0)
                cluster.notes.append(
                    f"{shown(source)}: ConfigMap {shown(name)}[{shown(key)}] shares each GPU as "
                    f"{replicas} × {shown(resource)} (device-plugin time-slicing)"
                )


def _time_slicing(config_text: str) -> dict[str, int]:
    """`sharing.timeSlicing.resources[]` of an NVIDIA device-plugin config, keyed by the
    resource name pods request (`<name>.shared` when renamed by default). Text that is not such a
    config (not YAML, over the YAML budgets, another shape) is not one: {}."""
    try:
        docs = load_text(config_text)
    except (yaml.YAMLError, YamlLimitError):
        return {}
    config = docs[0] if len(docs) == 1 else None
    sharing = config.get("sharing") if isinstance(config, Mapping) else None
    slicing = sharing.get("timeSlicing") if isinstance(sharing, Mapping) else None
    if not isinstance(slicing, Mapping):
        return {}
    rename_all = slicing.get("renameByDefault") is True
    entries = slicing.get("resources")
    found: dict[str, int] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        replicas, name, rename = entry.get("replicas"), entry.get("name"), entry.get("rename")
        if not is_whole(replicas) or not 1 <= replicas <= MAX_COUNT:
            continue
        if isinstance(name, str) and isinstance(rename, str | None):
            found[(rename or name) + (".shared" if rename_all and not rename else "")] = replicas
    return found


def read(
    manifests: Iterable[Mapping[str, Any]], *, source: str, cluster: Cluster
) -> list[Workload]:
    workloads: list[Workload] = []
    for doc in _jobset_jobs(source, manifests):
        found = _pod_template(source, doc)
        if found is None:
            continue
        template, replicas, unresolved_replicas, indexed = found
        kind = doc["kind"]
        top_meta, name = _metadata(source, doc)
        where = f"{kind}/{name}"
        _deadline_note(source, doc, where, cluster)
        meta = mapping(source, f"{where} template metadata", template.get("metadata"), "{}")
        namespace = _namespace(source, top_meta)
        spec = mapping(source, f"{where} pod spec", template.get("spec"), "spec: {containers: […]}")
        example = "containers: [{name: tf, image: …}]"
        containers = list(mappings(source, f"{where} containers", spec.get("containers"), example))
        # Sidecars (init containers that keep running) run beside the main containers.
        inits = mappings(source, f"{where} initContainers", spec.get("initContainers"), example)
        containers += [init for init in inits if init.get("restartPolicy") == "Always"]
        annotations = _strings(source, f"{where} annotations", meta.get("annotations"))
        queue = _strings(source, f"{where} labels", top_meta.get("labels")).get(QUEUE_LABEL)
        if queue is not None:
            cluster.notes.append(
                f"{shown(where)}: queued by Kueue in LocalQueue {shown(queue)} (namespace "
                f"{shown(namespace)}): it starts when Kueue admits it; budgeted here as running"
            )
        for container in containers:
            container_name = text(
                source, f"{where} container name", container.get("name", "?"), "name: tf"
            )
            who = f"{where}[{container_name}]"
            labels = _strings(source, f"{where} template labels", meta.get("labels"))
            env, unresolved = _environment(source, who, container, namespace, cluster, labels)
            gpus = _gpus(source, who, container, env, cluster)
            if gpus is None:
                if not any(name != "JOB_COMPLETION_INDEX" for name in env):
                    continue  # nothing of the kit's: not a TensorFlow container of ours
                gpus = GpuRequest(Placement.NONE)  # checked for what the runtime refuses
            workload = Workload(
                who=who,
                source=source,
                replicas=replicas,
                gpus=gpus,
                env=env,
                unresolved=unresolved,
                fix_hint=f"{where} container '{container_name}': env",
            )
            if unresolved_replicas:
                unresolved.append(unresolved_replicas)
            if kind == "DaemonSet":
                workload.notes.append("a DaemonSet runs one pod per node; counted once per node")
            if indexed:
                _worker_index(workload, replicas, cluster)
            processes = annotations.get(PROCESSES_ANNOTATION, "1")
            workload.processes = count_of(processes, processes, PROCESSES_ANNOTATION, unresolved)
            workloads.append(workload)
    return workloads


def _jobset_jobs(source: str, manifests: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A JobSet (jobset.x-k8s.io) read as its Jobs: each replicatedJob's Job template, its
    `replicas` Jobs' pods running at once (kubernetes-sigs/jobset creates `replicas` Jobs of it)."""
    out: list[Mapping[str, Any]] = []
    for doc in manifests:
        if doc["kind"] != "JobSet":
            out.append(doc)
            continue
        meta, name = _metadata(source, doc)
        spec = mapping(source, "JobSet spec", doc.get("spec"), "spec: {replicatedJobs: […]}")
        example = "replicatedJobs: [{name: worker, replicas: 1, template: {spec: …}}]"
        where = "JobSet replicatedJobs"
        for job in mappings(source, where, spec.get("replicatedJobs"), example):
            job_name = text(source, f"{where}[].name", job.get("name"), example)
            template = mapping(source, f"{where}[].template", job.get("template"), "{}")
            job_spec = dict(mapping(source, "JobSet Job spec", template.get("spec"), "{}"))
            job_spec["template"] = _jobset_labelled(
                source, job_spec.get("template"), name, job_name
            )
            copies, _ = _count("replicas", job.get("replicas", 1))
            parallelism, _ = _count("parallelism", job_spec.get("parallelism", 1))
            job_spec["parallelism"] = copies * parallelism
            if isinstance(job_spec.get("completions"), int):
                job_spec["completions"] = copies * job_spec["completions"]
            out.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {**meta, "name": f"{name}-{job_name}"},
                    "spec": job_spec,
                    FROM_JOBSET: name,
                }
            )
    return out


def _deadline_note(source: str, doc: Mapping[str, Any], where: str, cluster: Cluster) -> None:
    """A Job's activeDeadlineSeconds (a CronJob's Jobs', a JobSet's), said: the plan budgets the
    pods as running, and Kubernetes ends them then. Refused where the API server refuses it
    (pkg/apis/batch/validation validateJobSpec: an int64 ≥ 0)."""
    if doc["kind"] not in ("Job", "CronJob"):
        return
    spec = mapping(source, f"{where} spec", doc.get("spec"), "{}")
    if doc["kind"] == "CronJob":
        job = mapping(source, f"{where} jobTemplate", spec.get("jobTemplate"), "{}")
        spec = mapping(source, f"{where} jobTemplate.spec", job.get("spec"), "{}")
    seconds = spec.get("activeDeadlineSeconds")
    if seconds is None:
        return
    if not is_whole(seconds) or not 0 <= seconds <= MAX_INT64:
        raise refuse(
            source,
            f"{where} activeDeadlineSeconds",
            seconds,
            "a whole number of seconds ≥ 0 (Kubernetes: an int64)",
            "activeDeadlineSeconds: 7200",
        )
    ended = "each Job it starts is ended" if doc["kind"] == "CronJob" else "ended"
    after = duration_text(seconds)
    jobset = doc.get(FROM_JOBSET)
    again = ""
    if jobset is not None:  # JobSet v1alpha2 has no deadline: each Job has its own
        again = f"; each gang restart of JobSet {shown(jobset)} makes a new Job, with {after} again"
    cluster.notes.append(
        f"{shown(where)}: {ended} by Kubernetes {after} after it starts "
        f"(activeDeadlineSeconds), whatever its state{again}"
    )


# the labels JobSet's controller puts on every pod (kubernetes-sigs/jobset,
# api/jobset/v1alpha2/jobset_types.go: JobSetNameKey, ReplicatedJobNameKey), which its pods'
# `fieldRef`s read (the kit's Trainer runtime names its hosts from the first)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _jobset_labelled(source: str, raw: object, jobset: str, replicated: str) -> object:
    """The pod template with the labels JobSet adds; anything else is left for _pod_template to
    judge (and refuse with its own message)."""
    if not isinstance(raw, Mapping):
        return raw
    meta = mapping(source, "JobSet pod template metadata", raw.get("metadata"), "{}")
    labels = mapping(source, "JobSet pod template labels", meta.get("labels"), "{}")
    labels = {**labels, JOBSET_NAME_LABEL: jobset, REPLICATED_JOB_LABEL: replicated}
    return {**raw, "metadata": {**meta, "labels": labels}}


def _worker_index(workload: Workload, pods: int, cluster: Cluster) -> None:
    """An Indexed Job: Kubernetes sets JOB_COMPLETION_INDEX in each pod, which the runtime reads
    (TF_GPU_WORKERS, tfgpu.contract.tf_config); the last index is the one that can be out of
    range."""
    if "JOB_COMPLETION_INDEX" not in workload.env:  # a container's own value replaces Kubernetes'
        workload.env["JOB_COMPLETION_INDEX"] = str(max(pods - 1, 0))
        workload.index_per_pod = True
    if workload.gpus.placement is Placement.NONE:
        cluster.notes.append(
            f"{shown(workload.who)}: an Indexed Job of {pods} pod(s) without a GPU (a parameter "
            "server): nothing to budget; its environment is checked as its runtime will check it"
        )
        return
    cluster.notes.append(
        f"{shown(workload.who)}: an Indexed Job of {pods} pod(s) (multi-worker training when "
        "TF_GPU_WORKERS is set): each pod is budgeted as any pod, with its own caps, on the "
        "GPUs its nvidia.com/gpu limit gives it; pods share a node only where its GPUs allow"
    )


def _strings(source: str, where: str, raw: object) -> dict[str, str]:
    """A map[string]string of the API (annotations, labels)."""
    out: dict[str, str] = {}
    example = "annotations: {tfgpu.io/processes: '2'}"
    for key, value in mapping(source, where, raw, example).items():
        key_text = text(source, f"{where} key", key, example)
        out[key_text] = text(source, f"{where}.{shown(key_text)}", value, example)
    return out


def _namespace(source: str, meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace") or "default"
    return text(source, "metadata.namespace", namespace, "namespace: default")


_PodTemplate = tuple[Mapping[str, Any], int, Unresolved | None, bool]


def _pod_template(source: str, doc: Mapping[str, Any]) -> _PodTemplate | None:
    """(pod template, concurrent pods, why the count is unknown, whether an Indexed Job) for
    workload kinds."""
    kind = doc["kind"]
    if kind not in ("Pod", "CronJob", "Job", *_TEMPLATED):
        return None
    spec = mapping(source, f"{kind} spec", doc.get("spec"), "spec: {…}")
    if kind == "Pod":
        return {"metadata": doc.get("metadata") or {}, "spec": spec}, 1, None, False
    if kind == "CronJob":
        job_template = mapping(source, "CronJob jobTemplate", spec.get("jobTemplate"), "{spec: …}")
        spec = mapping(source, "CronJob jobTemplate.spec", job_template.get("spec"), "{…}")
    if kind in ("Job", "CronJob"):
        return _job(source, spec)
    template = mapping(source, f"{kind} spec.template", spec.get("template"), "template: {…}")
    if kind == "DaemonSet":
        return template, 1, None, False
    return template, *_count("replicas", spec.get("replicas", 1)), False


def _count(what: str, raw: object) -> tuple[int, Unresolved | None]:
    """A pod count as Kubernetes takes it: a whole number from 0 to 2^31-1 (int32; YAML `true`
    is not one); else 1, and why the count is unknown."""
    if is_whole(raw) and 0 <= raw <= MAX_COUNT:
        return raw, None
    return 1, Unresolved(what, f"{quoted(raw)} is not a whole number ≥ 0; counted as 1")


def _job(source: str, spec: Mapping[str, Any]) -> _PodTemplate:
    """A Job runs min(parallelism, completions) pods at once (both default to 1)."""
    template = mapping(source, "Job spec.template", spec.get("template"), "template: {…}")
    parallelism, unresolved = _count("parallelism", spec.get("parallelism", 1))
    # completions null: unset, as Kubernetes defaults it
    if unresolved is None and spec.get("completions") is not None:
        completions, unresolved = _count("completions", spec["completions"])
        if unresolved is None:
            parallelism = min(parallelism, completions)
    return template, parallelism, unresolved, spec.get("completionMode") == "Indexed"


def gpu_quantity(source: str, where: str, raw: object) -> int:
    """An extended resource's amount: a Kubernetes quantity that is a whole number ≥ 0 (the
    API server: "must be an integer", non-negative), at most devices.MAX_GPUS per container."""
    accepted = (
        f"a whole number of GPUs from 0 to {devices.MAX_GPUS} (a Kubernetes quantity; "
        "extended resources must be integers)"
    )
    value: Fraction | None = None
    if is_whole(raw):
        value = Fraction(raw)
    elif isinstance(raw, str | float) and not isinstance(raw, bool):
        value = kube_quantity.parse(raw if isinstance(raw, str) else repr(raw))
    if value is None or value.denominator != 1 or not 0 <= value <= devices.MAX_GPUS:
        raise refuse(source, where, raw, accepted, "limits: {nvidia.com/gpu: 1}")
    return int(value)


def _gpus(
    source: str, who: str, container: Mapping[str, Any], env: Mapping[str, str], cluster: Cluster
) -> GpuRequest | None:
    where = f"{who} resources"
    resources = mapping(source, where, container.get("resources"), "resources: {limits: {…}}")
    requests = mapping(source, f"{where}.requests", resources.get("requests"), "{cpu: 1}")
    limits = mapping(source, f"{where}.limits", resources.get("limits"), "{nvidia.com/gpu: 1}")
    found: GpuRequest | None = None
    for resource in (*limits, *(r for r in requests if r not in limits)):
        name = text(source, f"{where} resource name", resource, "nvidia.com/gpu")
        if not name.startswith(GPU_RESOURCE_PREFIX):
            continue
        if name not in limits:
            raise UsageError(
                f"{shown(source)}: {shown(where)}.requests has {shown(name)} without a limit: "
                "accepted: the GPU count in limits (Kubernetes: Limit must be set for non "
                f"overcommitable resources); example: limits: {{{shown(name)}: 1}}"
            )
        count = gpu_quantity(source, f"{where}.limits.{shown(name)}", limits[name])
        if name in requests:
            requested = gpu_quantity(source, f"{where}.requests.{shown(name)}", requests[name])
            if requested != count:
                raise UsageError(
                    f"{shown(source)}: {shown(where)}.requests.{shown(name)} is {requested} and "
                    f"the limit {count}: accepted: equal (Kubernetes: must be equal to "
                    f"{shown(name)} limit; GPUs are not overcommitted); "
                    f"example: limits: {{{shown(name)}: {count}}}"
                )
        if count == 0 or found is not None:
            continue
        replicas = cluster.slices.get(name, 1)  # ≥ 1; 1 is slices_per_gpu's default
        placement = Placement.TIME_SLICED if replicas > 1 else Placement.EXCLUSIVE
        found = GpuRequest(placement, count=count, resource=name, slices_per_gpu=replicas)
    if found is not None:
        return found
    visible = env.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if visible and visible not in ("none", "void"):
        return GpuRequest(
            Placement.UNKNOWN,
            reason=(
                f"NVIDIA_VISIBLE_DEVICES={shown(visible)} without a {GPU_RESOURCE_PREFIX} limit: "
                "the device plugin does not account for these GPUs, so who shares them is unknown"
            ),
        )
    return None


_LABEL_FIELD = re.compile(r"metadata\.labels\['([^']*)'\]")


def _environment(
    source: str,
    who: str,
    container: Mapping[str, Any],
    namespace: str,
    cluster: Cluster,
    labels: Mapping[str, str],
) -> tuple[dict[str, str], list[Unresolved]]:
    """Known values of the relevant variables, and what is unknown. `env` wins over
    `envFrom`, as in Kubernetes; `$(NAME)` is expanded as the kubelet does, from the variables
    defined before it (a literal, or a fieldRef to one of the pod template's labels)."""
    env: dict[str, str] = {}
    defined: dict[str, str] = {}  # every variable, relevant or not, that `$(NAME)` can name
    unresolved: list[Unresolved] = []
    example = "envFrom: [{configMapRef: {name: caps}}]"
    for item in mappings(source, f"{who} envFrom", container.get("envFrom"), example):
        prefix = text(source, f"{who} envFrom[].prefix", item.get("prefix") or "", "prefix: TF_")
        ref = item.get("configMapRef")
        data = None
        if ref is not None:
            ref_map = mapping(source, f"{who} envFrom[].configMapRef", ref, example)
            ref_name = text(source, f"{who} configMapRef.name", ref_map.get("name"), "name: caps")
            data = cluster.config_maps.get((namespace, ref_name))
        if data is not None:
            env.update({prefix + k: v for k, v in data.items() if envvars.relevant(prefix + k)})
        else:
            what = "secretRef" if "secretRef" in item else "configMapRef"
            named = mapping(source, f"{who} envFrom[].{what}", item.get(what), example).get("name")
            why = (
                f"{what} {quoted(named)} is not in the input: variables set only there are unknown"
            )
            unresolved.append(Unresolved("envFrom", why))
    example = "env: [{name: TF_GPU_MEM_LIMIT, value: '6GiB'}]"
    for item in mappings(source, f"{who} env", container.get("env"), example):
        name = text(source, f"{who} env[].name", item.get("name"), example)
        value = item.get("value")
        if value is not None:  # EnvVar.value is a string, whatever the variable
            text(source, f"{who} env {shown(name)} value", value, example + " (quote numbers)")
        literal = "value" in item or "valueFrom" not in item
        if literal:
            expanded, known = envvars.kube_expand(str(value or ""), defined)
            if known:
                defined[name] = expanded
        else:
            defined.pop(name, None)
            label = _label_ref(item["valueFrom"])
            if label is not None and label in labels:
                defined[name] = labels[label]
        if not envvars.relevant(name):
            continue
        env.pop(name, None)
        if literal:
            if known:
                env[name] = expanded
            else:
                unresolved.append(
                    Unresolved(name, f"'{shown(str(value))}' expands $(…) at run time")
                )
            continue
        if name in defined:  # a label of the pod template
            env[name] = defined[name]
            continue
        value_from = mapping(source, f"{who} env {shown(name)} valueFrom", item["valueFrom"], "{}")
        ref_where = f"{who} env {shown(name)} configMapKeyRef"
        ref = mapping(source, ref_where, value_from.get("configMapKeyRef"), "{name: x, key: y}")
        map_name, key = ref.get("name"), ref.get("key")
        data = (
            cluster.config_maps.get((namespace, map_name), {}) if isinstance(map_name, str) else {}
        )
        if isinstance(key, str) and key in data:
            env[name] = data[key]
        else:
            kinds = ", ".join(shown(str(k)) for k in sorted(map(str, value_from))) or "valueFrom"
            unresolved.append(Unresolved(name, f"comes from {kinds}, which is not in the input"))
    return env, unresolved


def _label_ref(value_from: object) -> str | None:
    """The label a `valueFrom: {fieldRef: {fieldPath: metadata.labels['k']}}` reads, or None."""
    ref = value_from.get("fieldRef") if isinstance(value_from, Mapping) else None
    path = ref.get("fieldPath") if isinstance(ref, Mapping) else None
    match = _LABEL_FIELD.fullmatch(path) if isinstance(path, str) else None
    return match.group(1) if match else None

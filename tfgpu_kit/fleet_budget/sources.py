"""Load the files given to `plan` and hand each to the right reader.

A file is a compose file when its (single) document has `services:`; otherwise
every document must be a Kubernetes object (multi-document YAML, `kind: List`).
ConfigMaps are gathered from all manifests first, so a time-slicing config or an
`envFrom` ConfigMap may sit in another file than the pods that use it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfgpu_kit.errors import UsageError
from tfgpu_kit.fleet_budget import compose, kube
from tfgpu_kit.fleet_budget.model import Workload
from tfgpu_kit.yamlfile import load_documents


@dataclass
class Inputs:
    workloads: list[Workload] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load(
    paths: Sequence[str],
    *,
    host_gpus: Sequence[str] | None,
    time_slicing: int | None,
    profiles: Sequence[str] = (),
) -> Inputs:
    inputs = Inputs()
    cluster = kube.Cluster()
    if time_slicing is not None:
        for resource in (kube.GPU_RESOURCE_PREFIX, kube.GPU_RESOURCE_PREFIX + ".shared"):
            cluster.slices[resource] = time_slicing
    manifests: list[tuple[str, list[Any]]] = []
    for path in paths:
        docs = load_documents(path, UsageError)
        if len(docs) == 1 and compose.is_compose(docs[0]):
            with _shape(path, "a compose file"):
                found, notes = compose.read(
                    docs[0], source=path, host_gpus=host_gpus, profiles=profiles
                )
            inputs.workloads += found
            inputs.notes += notes
            continue
        objects = kube.flatten(docs)
        if not objects:
            raise UsageError(
                f"{path}: neither a compose file (no top-level 'services:') nor Kubernetes "
                "manifests (no document with 'apiVersion' and 'kind')",
                hint="pass compose files (compose.yaml) or manifests (kubectl-style YAML)",
            )
        with _shape(path, "Kubernetes manifests"):
            kube.survey(objects, source=path, cluster=cluster)
        manifests.append((path, objects))
    for path, objects in manifests:
        with _shape(path, "Kubernetes manifests"):
            inputs.workloads += kube.read(objects, source=path, cluster=cluster)
    inputs.notes += cluster.notes
    if len(paths) > 1:
        for workload in inputs.workloads:
            workload.who = f"{Path(workload.source).name}:{workload.who}"
    return inputs


@contextmanager
def _shape(path: str, what: str) -> Iterator[None]:
    """The readers walk the YAML as mappings and lists: a scalar or list where a mapping belongs
    (`deploy: 5`, `containers: [5]`) is the file's fault, so say so instead of a traceback."""
    try:
        yield
    except (AttributeError, TypeError) as error:
        raise UsageError(
            f"{path}: not the structure of {what}: a value has the wrong type ({error})",
            hint="check that mappings are mappings and lists are lists, e.g. "
            "deploy: {replicas: 2} or containers: [{name: app, ...}]",
        ) from None

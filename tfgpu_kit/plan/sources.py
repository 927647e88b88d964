"""Load the files given to `plan` and hand each to the right reader.

A file is a compose file when its (single) document has `services:`; otherwise
every document must be a Kubernetes object (multi-document YAML, `kind: List`).
ConfigMaps are gathered from all manifests first, so a time-slicing config or an
`envFrom` ConfigMap may sit in another file than the pods that use it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfgpu_kit.plan import compose_reader, kube_reader, trainer_objects
from tfgpu_kit.plan.model import Problem, Workload
from tfgpu_kit.shared.errors import EXIT_IO, KitError, UsageError
from tfgpu_kit.shared.yamlfile import load_documents, shown


class UnreadableInput(KitError):
    """An input file that cannot be read at all (missing, not a regular file, over the size cap,
    not UTF-8): README's exit code 5, as for any file the user named. Bad content is a
    UsageError (2)."""

    exit_code = EXIT_IO


@dataclass
class Inputs:
    workloads: list[Workload] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # inputs plan cannot vouch for


def load(
    paths: Sequence[str],
    *,
    host_gpus: Sequence[str] | None,
    time_slicing: int | None,
    profiles: Sequence[str] = (),
) -> Inputs:
    inputs = Inputs()
    cluster = kube_reader.Cluster()
    if time_slicing is not None:
        prefix = kube_reader.GPU_RESOURCE_PREFIX
        cluster.slices.update(dict.fromkeys((prefix, prefix + ".shared"), time_slicing))
    manifests: list[tuple[str, list[Any]]] = []
    profiles_seen: set[str] = set()
    composes = 0
    _refuse_repeats(paths)
    for path in paths:
        docs = load_documents(path, UsageError, unreadable=UnreadableInput)
        if len(docs) == 1 and compose_reader.is_compose(docs[0]):
            composes += 1
            with _shape(path, "a compose file"):
                found = compose_reader.read(
                    docs[0], source=path, host_gpus=host_gpus, profiles=profiles
                )
            inputs.workloads += found.workloads
            inputs.notes += found.notes
            profiles_seen |= found.profiles
            continue
        with _shape(path, "Kubernetes manifests"):
            objects = kube_reader.flatten(docs, path)
            if not objects:
                raise UsageError(
                    f"{shown(path)}: neither a compose file (no top-level 'services:') nor "
                    "Kubernetes manifests (no document with 'apiVersion' and 'kind')",
                    hint="pass compose files (compose.yaml) or manifests (kubectl-style YAML)",
                )
            kube_reader.survey(objects, source=path, cluster=cluster)
        manifests.append((path, objects))
    for path, objects in manifests:
        with _shape(path, "Kubernetes manifests"):
            inputs.workloads += kube_reader.read(objects, source=path, cluster=cluster)
    inputs.notes += cluster.notes
    notes, inputs.problems = trainer_objects.judge(
        doc for _, objects in manifests for doc in objects
    )
    inputs.notes += notes
    _check_profiles(profiles, profiles_seen, composes)
    if len(paths) > 1:
        for workload in inputs.workloads:
            workload.who = f"{Path(workload.source).name}:{workload.who}"
    return inputs


def _refuse_repeats(paths: Sequence[str]) -> None:
    """The same file twice is refused, not counted twice or once: plan reads each file as its own
    project on one host, so a repeat would double its demand, and silently dropping it would
    hide a mistaken argument list (a shell glob that overlaps a named file is the usual cause).
    "The same" is the same inode, so `a.yaml`, `./a.yaml` and a symlink to it are all caught."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # load_documents says why it cannot be read
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise UsageError(
                f"{shown(path)} is the same file as {shown(seen[key])}: accepted: each input "
                "once (each file is budgeted as its own project on the host, so a repeat would "
                "count its services twice); example: plan compose.yaml k8s/serve.yaml"
            )
        seen[key] = path


def _check_profiles(wanted: Sequence[str], seen: set[str], composes: int) -> None:
    """--profile NAME must name a profile some compose service has: a typo would otherwise leave
    the profile's services out of the plan without a word."""
    unknown = [name for name in dict.fromkeys(wanted) if name not in seen]
    if not unknown:
        return
    where = (
        f"the compose files name: {', '.join(sorted(shown(p) for p in seen))}"
        if seen
        else "no service of the inputs has profiles"
        + ("" if composes else " (--profile applies to compose files only)")
    )
    raise UsageError(
        f"--profile {', '.join(repr(shown(n)) for n in unknown)} is not a profile of the inputs: "
        f"{where}; example: --profile {sorted(seen)[0] if seen else 'monitoring'}"
    )


@contextmanager
def _shape(path: str, what: str) -> Iterator[None]:
    """The readers walk the YAML as mappings and lists: a scalar or list where a mapping belongs
    (`deploy: 5`, `containers: [5]`) is the file's fault, so say so instead of a traceback."""
    try:
        yield
    except (AttributeError, TypeError) as error:
        raise UsageError(
            f"{shown(path)}: not the structure of {what}: a value has the wrong type "
            f"({shown(str(error))})",
            hint="check that mappings are mappings and lists are lists, e.g. "
            "deploy: {replicas: 2} or containers: [{name: app, ...}]",
        ) from None

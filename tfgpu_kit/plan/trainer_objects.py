"""Kubeflow Trainer objects in `plan`'s input: named, never silently skipped.

A ClusterTrainingRuntime (or TrainingRuntime) is a template and a TrainJob only a reference to
one: Trainer's controller merges them into a JobSet named after the TrainJob, and only that
JobSet's pods run. `plan` reads pods, so a TrainJob is planned when its JobSet is in the input
(`kubectl get jobset NAME -o yaml`), and is otherwise an error that says what to plan instead:
an empty "plan OK" would vouch for pods it never saw."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tfgpu_kit.plan.fields import is_whole
from tfgpu_kit.plan.model import Problem
from tfgpu_kit.shared.flag_values import duration_text
from tfgpu_kit.shared.yamlfile import shown

GROUP = "trainer.kubeflow.org/"
RUNTIMES = ("ClusterTrainingRuntime", "TrainingRuntime")


def _key(doc: Mapping[str, Any]) -> tuple[str, str]:
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or "default"), str(meta.get("name", "?"))


def judge(docs: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[Problem]]:
    """(notes, problems) for the Trainer objects among every input's manifests."""
    docs = list(docs)
    jobsets = {_key(doc) for doc in docs if doc["kind"] == "JobSet"}
    notes: list[str] = []
    problems: list[Problem] = []
    for doc in docs:
        api, kind = str(doc["apiVersion"]), str(doc["kind"])
        if not api.startswith(GROUP):
            continue
        namespace, name = _key(doc)
        who = shown(f"{kind}/{name}")
        if kind == "TrainJob":
            notes += _deadline(who, doc)
        if kind in RUNTIMES:
            notes.append(
                f"{who}: not read: a Trainer runtime is a template; its pods exist only "
                "as the JobSet of a TrainJob that runs it, and that JobSet is what plan reads"
            )
        elif kind == "TrainJob" and (namespace, name) in jobsets:
            notes.append(f"{who}: planned through its JobSet {shown(name)} in the input")
        elif kind == "TrainJob":
            problems.append(
                Problem(
                    "error",
                    who,
                    "not planned: plan reads pods, and a TrainJob's pods come from its runtime "
                    "only when Trainer's controller makes them a JobSet of the same name; "
                    "ClusterTrainingRuntimes are not read",
                    f"plan the JobSet Trainer makes: kubectl get jobset {shown(name)} -n "
                    f"{shown(namespace)} -o yaml > jobset.yaml, then ./kit plan jobset.yaml; or, "
                    "before applying, render the same flags with --jobset instead of --trainer "
                    "(the same pods) and plan those files",
                )
            )
    return notes, problems


def _deadline(who: str, doc: Mapping[str, Any]) -> list[str]:
    """A TrainJob's activeDeadlineSeconds (Trainer v2.2+; the CRD takes a whole number ≥ 1), said:
    Trainer then fails it and deletes its JobSet, whatever its state."""
    spec = doc.get("spec")
    seconds = spec.get("activeDeadlineSeconds") if isinstance(spec, Mapping) else None
    if not is_whole(seconds) or seconds < 1:
        return []
    return [
        f"{who}: ended by Trainer {duration_text(seconds)} after it starts "
        "(activeDeadlineSeconds), whatever its state: its JobSet is deleted"
    ]

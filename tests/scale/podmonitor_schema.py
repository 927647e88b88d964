"""A structural check of the PodMonitor `build.py k8s --pod-monitor` renders.

PodMonitor is a CustomResourceDefinition of the Prometheus Operator (monitoring.coreos.com/v1);
kubernetes-validate bundles only Kubernetes' own types, and no package the tests install here
ships the CRD's published schema. So this schema is written from that CRD
(prometheus-operator, example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml,
operator 0.93.0): the field names, types and required fields the kit uses, with unknown fields
refused (additionalProperties false) where the kit writes; `metadata` and `spec.selector` are
Kubernetes' own ObjectMeta and LabelSelector, taken strict from kubernetes-validate's bundle.
It does not cover the CRD's fields the kit leaves out.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import referencing

DEFINITIONS_URI = "https://kubernetes.io/api/_definitions.json"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"

POD_MONITOR: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {
            "allOf": [{"$ref": f"{DEFINITIONS_URI}#/$defs/{META}.ObjectMeta"}],
            "required": ["name"],
        },
        "spec": {
            "type": "object",
            "required": ["selector"],  # the CRD's only required field of spec
            "additionalProperties": False,
            "properties": {
                "selector": {"$ref": f"{DEFINITIONS_URI}#/$defs/{META}.LabelSelector"},
                "podMetricsEndpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port"],  # the kit scrapes the named `metrics` port
                        "properties": {
                            "port": {"type": "string", "minLength": 1},
                            "path": {"type": "string", "pattern": "^/"},
                        },
                    },
                },
            },
        },
    },
}


def _kubernetes_definitions(version: str) -> dict[str, Any]:
    """kubernetes-validate's strict definitions of Kubernetes `version` (e.g. "1.37.0")."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = folder / f"v{version}-local-strict" / "_definitions.json"
    definitions: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert definitions["$id"] == DEFINITIONS_URI
    return definitions


def validate_pod_monitor(doc: dict[str, Any], kubernetes_version: str) -> None:
    """Raise jsonschema.ValidationError when `doc` is not a PodMonitor the CRD accepts."""
    definitions = referencing.Resource.from_contents(_kubernetes_definitions(kubernetes_version))
    registry: referencing.Registry[Any] = definitions @ referencing.Registry()
    validator = jsonschema.Draft202012Validator(POD_MONITOR, registry=registry)
    validator.validate(doc)

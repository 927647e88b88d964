"""gpu-report.json (at the checkout's root): which GPU claim held, with figures (owner: gpu tests).

tests/gpu/conftest.py gathers the claims of the tests it runs. Under pytest-xdist each worker holds
only the claims of its own tests: a worker hands them to the controller (its `workeroutput`, under
KEY) and tests/conftest.py, on the controller, writes one report from all of them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# tests/conftest.py imports this module, also in tests/test_suite_policy.py's tiny copy of the
# suite: so nothing of the suite's own is imported here
REPORT = Path(__file__).resolve().parents[2] / "gpu-report.json"
KEY = "tfgpu_gpu_claims"  # in xdist's workeroutput


def handed_over(context: dict[str, Any], claims: dict[str, dict[str, Any]]) -> str:
    """What a worker hands to the controller."""
    return json.dumps({"context": context, "claims": claims})


def write(context: dict[str, Any], claims: dict[str, dict[str, Any]]) -> None:
    report = {
        **context,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "claims": [{"test": nodeid, **entry} for nodeid, entry in claims.items()],
    }
    REPORT.write_text(json.dumps(report, indent=2) + "\n")


def write_merged(handed: Iterable[str]) -> None:
    """One report from what each worker handed over (the host's context is the same on all)."""
    context: dict[str, Any] = {}
    claims: dict[str, dict[str, Any]] = {}
    for text in handed:
        part = json.loads(text)
        images = [*context.get("images", []), *part["context"].get("images", [])]
        context.update(part["context"])
        if images:
            context["images"] = list(dict.fromkeys(images))
        claims.update(part["claims"])
    if claims:
        write(context, claims)

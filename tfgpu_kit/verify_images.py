"""Verifying built images: the fake NVIDIA driver for the GPU probe, then per image what it holds
against the matrix (tfgpu_kit/verify.py) and the table or JSON of the checks. Used by `build.py
verify` and `build.py build --verify`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tfgpu_kit import spec as specs
from tfgpu_kit import verify
from tfgpu_kit.errors import EXIT_FAILED, KitError
from tfgpu_kit.output import print_json, table

log = logging.getLogger(__name__)


def fake_driver(enabled: bool) -> Path | None:
    """The compiled fake driver for the GPU probe, or None when it was turned off."""
    if not enabled:
        log.warning("--no-gpu-probe: TensorFlow's own verdict on the GPU is not checked")
        return None
    from tfgpu_kit import fakegpu

    try:
        return fakegpu.build()
    except KitError as exc:
        raise KitError(
            f"cannot compile the fake NVIDIA driver for the GPU probe: {exc.message}",
            hint=exc.hint or "install gcc, or pass --no-gpu-probe to skip the probe",
        ) from None


def verify_images(
    spec: specs.Spec, client: Any, refs: list[str], *, as_json: bool, gpu_probe: bool = True
) -> int:
    driver = fake_driver(gpu_probe)
    results: dict[str, list[verify.Check]] = {}
    for ref in refs:
        log.info("verifying %s", ref)
        results[ref] = verify.compare(spec, verify.collect(client, ref, fake_driver=driver))
    if as_json:
        print_json({ref: [c.__dict__ for c in checks] for ref, checks in results.items()})
    else:
        for ref, checks in results.items():
            table(
                ref,
                ["check", "", "detail"],
                [[c.name, "ok" if c.ok else "FAIL", c.detail] for c in checks],
            )
    failed = False
    for ref, checks in results.items():
        for check in verify.failures(checks):
            failed = True
            log.error("%s: %s: %s", ref, check.name, check.detail)
    return EXIT_FAILED if failed else 0

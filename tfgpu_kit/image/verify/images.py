"""Verifying built images: the fake NVIDIA driver for the GPU probe, then per image what it holds
(verify.observe) against the matrix (verify.checks) and its size against its
budget, and the table or JSON of the checks. Used by `build.py verify` and `build.py build
--verify`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import fakegpu
from tfgpu_kit.image.verify import jetson, observe
from tfgpu_kit.image.verify.checks import Check, Observed, compare, failures
from tfgpu_kit.matrix import catalog
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.locks import wheel_locks
from tfgpu_kit.shared.errors import EXIT_FAILED, KitError
from tfgpu_kit.shared.output import BYTES_PER_MIB, print_json, table

log = logging.getLogger(__name__)


def fake_driver(enabled: bool) -> Path | None:
    """The compiled fake driver for the GPU probe, or None when it was turned off."""
    if not enabled:
        log.warning("--no-gpu-probe: TensorFlow's own verdict on the GPU is not checked")
        return None
    try:
        return fakegpu.build()
    except fakegpu.FakeGpuError as exc:
        raise KitError(
            f"cannot compile the fake NVIDIA driver for the GPU probe: {exc.message}",
            hint=exc.hint or "install gcc, or pass --no-gpu-probe to skip the probe",
        ) from None


def _size_budget(
    spec: specs.Spec,
    client: Any,
    ref: str,
    observed: Observed,
    image: catalog.Image,
    cuda_lock: wheel_locks.Lock,
    images_lock: wheel_locks.ImageLock,
) -> list[Check]:
    """What the built image adds to its base (the engine's sizes, the image's read by `collect`)
    against its budget: the locked parts plus the variant's budget for the kit; nothing to check,
    and a warning that says so, when the base it names is not in the engine (pulled or built
    elsewhere)."""
    import docker.errors  # here: the Docker SDK costs every build.py command 45-90 ms to import

    base = observed.labels.get("org.opencontainers.image.base.name", "")
    try:
        base_size = int(client.images.get(base).attrs["Size"])
    except (docker.errors.ImageNotFound, docker.errors.APIError):
        log.warning("%s: size budget not checked: its base %s is not in the engine", ref, base)
        return []
    adds, kit_mib = catalog.locked_additions(spec, image, cuda_lock, images_lock)
    if kit_mib is None:  # the image's record sets no budget
        return []
    added = observed.size - base_size
    budget = adds.total + kit_mib * BYTES_PER_MIB
    detail = (
        f"adds {added / BYTES_PER_MIB:.1f} MiB to {base};"
        f" budget {budget / BYTES_PER_MIB:.1f} MiB"
        f" (locked {adds.total / BYTES_PER_MIB:.1f} + the kit's {kit_mib:g})"
    )
    return [Check("size budget", added <= budget, detail)]


def verify_images(
    spec: specs.Spec, client: Any, refs: list[str], *, as_json: bool, gpu_probe: bool = True
) -> int:
    driver = fake_driver(gpu_probe)
    results: dict[str, list[Check]] = {}
    cuda_lock, images_lock = wheel_locks.load(), wheel_locks.load_images()
    by_name = {image.name: image for image in catalog.images(spec)}
    for ref in refs:
        log.info("verifying %s", ref)
        observed = observe.collect(client, ref, fake_driver=driver)
        if jetson.is_jetson(observed.labels):  # arm64, L4T: what can be judged off a Jetson
            results[ref] = jetson.compare(spec, observed)
            continue
        results[ref] = compare(spec, observed)
        image = by_name.get(observed.labels.get("org.opencontainers.image.version", ""))
        if observed.kit_image and image is not None:
            results[ref] += _size_budget(spec, client, ref, observed, image, cuda_lock, images_lock)
    if as_json:
        print_json({ref: [c.as_dict() for c in checks] for ref, checks in results.items()})
    else:
        for ref, checks in results.items():
            table(
                ref,
                ["check", "", "detail"],
                [[c.name, c.verdict, c.detail] for c in checks],
            )
    failed = [(ref, check) for ref, checks in results.items() for check in failures(checks)]
    for ref, check in failed:
        log.error("%s: %s: %s", ref, check.name, check.detail)
    return EXIT_FAILED if failed else 0

"""`build.py sbom IMAGE`: the SBOM an image of the kit carries (CycloneDX JSON, written by its own
build: tfgpu.machine.sbom), read out of the image without running it, and validated against the
CycloneDX specification's schema by cyclonedx-python-lib."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfgpu_kit.shared.errors import KitError
from tfgpu_kit.shared.name_rules import image_reference

log = logging.getLogger(__name__)

LABEL = "io.tfgpu.sbom"  # the path of the SBOM inside the image (templates/partials/labels.j2)
# the spec version tfgpu.machine.sbom writes (its SPEC_VERSION); the validator is chosen by it
SCHEMAS = {"1.6": "V1_6", "1.5": "V1_5"}


@dataclass(frozen=True)
class Sbom:
    ref: str
    path: str
    text: str
    doc: dict[str, Any]

    def summary(self) -> str:
        """One line for people: where it was, that it is valid, what it lists, its size."""
        n = self.counts()
        return (
            f"{self.ref}: {self.path}, valid CycloneDX {self.doc['specVersion']}: {n['all']} "
            f"components ({n['dpkg']} OS packages, {n['python']} Python distributions, "
            f"{n['sha256']} with the sha256 of their wheel), "
            f"{len(self.text.encode()) / 1024:.0f} KiB"
        )

    def counts(self) -> dict[str, int]:
        """Components by source (dpkg, python) and how many carry a sha256."""
        out = {"all": 0, "dpkg": 0, "python": 0, "sha256": 0}
        for comp in self.doc.get("components", []):
            out["all"] += 1
            props = {p.get("name"): p.get("value") for p in comp.get("properties", [])}
            source = props.get("tfgpu:source")
            if source in out:
                out[source] += 1
            if any(h.get("alg") == "SHA-256" for h in comp.get("hashes", [])):
                out["sha256"] += 1
        return out


def validate(text: str) -> str:
    """The CycloneDX version of `text`, or KitError naming what the schema refuses."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    try:
        version = str(json.loads(text).get("specVersion"))
    except (ValueError, AttributeError) as exc:
        raise KitError(f"the SBOM is not a JSON object: {exc}") from None
    if version not in SCHEMAS:
        raise KitError(
            f"the SBOM says specVersion {version!r}; this kit validates {', '.join(SCHEMAS)}"
        )
    error = JsonStrictValidator(getattr(SchemaVersion, SCHEMAS[version])).validate_str(text)
    if error is not None:
        raise KitError(f"the SBOM is not valid CycloneDX {version}: {error}")
    return version


def read(c: Any, ref: str) -> Sbom:
    """The SBOM of the local image `ref` (the file its io.tfgpu.sbom label names), validated."""
    import docker.errors  # here: the Docker SDK costs every build.py command 45-90 ms to import

    from tfgpu_kit.image import docker_engine  # here too: it imports the Docker SDK

    image = docker_engine.image(c, ref)
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    path = labels.get(LABEL)
    if not path:
        raise KitError(
            f"{ref} has no {LABEL} label: it was not built by this kit, or by a version before "
            "the SBOM (rebuild it with ./kit build)"
        )
    container = c.containers.create(image.id, command=["true"], network_disabled=True)
    try:
        chunks, _ = container.get_archive(path)
        data = b"".join(chunks)
    except docker.errors.NotFound:
        raise KitError(f"{ref}: its label names {path}, which the image does not hold") from None
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member is not None else None
        if extracted is None:
            raise KitError(f"{ref}: {path} is not a regular file")
        text = extracted.read().decode("utf-8")
    validate(text)
    return Sbom(ref, path, text, json.loads(text))


def export(image: str, out: Path | None) -> Sbom:
    """`build.py sbom IMAGE [--out FILE]`: the arguments checked before the engine is asked
    anything, the SBOM read and validated, and FILE written whole (or not at all)."""
    # Here: the Docker SDK costs every build.py command 45-90 ms to import.
    from tfgpu_kit.image import docker_engine

    ref = image_reference("IMAGE", image, "tfgpu/tensorflow:2.21.0-gpu")
    if out is not None:
        _check_writable(out)
    found = read(docker_engine.client(), ref)
    if out is not None:
        _write_whole(out, found.text)
    return found


def _check_writable(out: Path) -> None:
    """OSError (exit 5, naming the path) when FILE could not be written: a folder, or a folder
    that is missing or not writable."""
    if out.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder: --out takes a file", str(out))
    if not out.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "its folder does not exist", str(out))
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "its folder is not writable", str(out))


def _write_whole(out: Path, text: str) -> None:
    """FILE as a whole or not at all: written beside it, then renamed over it."""
    fd, temp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temp, out)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise

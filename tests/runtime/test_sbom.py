"""The SBOM an image's build writes (tfgpu.machine.sbom, tfgpu.image_record): valid CycloneDX 1.6 by
cyclonedx-python-lib's schema validator, package URLs that packageurl-python (the purl spec's
reference library) parses back, and the wheels' sha256 from the list the build installed them by."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL
from tfgpu.commands import image_record
from tfgpu.machine import pins, sbom

from tests.runtime import dists

STATUS = """\
Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u4
Description: GNU C Library
 continuation line: Shared libraries.

Package: libc6
Status: install ok installed
Architecture: i386
Version: 2.36-9+deb12u4

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 1:2024a-0+deb12u1
"""

HASH = "a" * 64


def make(tmp_path: Path) -> dict[str, object]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    status = tmp_path / "status"
    status.write_text(STATUS)
    site = tmp_path / "site"
    dists.install(site, "tensorflow", "2.21.0", top_level="tensorflow")
    dists.install(site, "nvidia-cudnn-cu12", "9.3.0.75")
    dists.install(site, "tfgpu", "0.1.0+local")
    second = tmp_path / "site2"
    dists.install(second, "tfgpu", "0.1.0+local")  # a second copy, in another site directory
    wheels = tmp_path / "installed-wheels.txt"
    wheels.write_text(
        f"nvidia-cudnn-cu12==9.3.0.75 --hash=sha256:{HASH}\n"
        f"tfgpu==0.1.0+local --hash=sha256:{'b' * 64}\n"
    )
    found = pins.installed([str(site)])
    return sbom.document(
        packages=sbom.dpkg_packages(str(status)),
        dists=pins.every([str(site), str(second)]),
        pins=pins.pinned(found),
        hashes=sbom.wheel_hashes(str(wheels)),
        distro=("debian", "12"),
        image={"name": "tfgpu/tensorflow:2.21.0-gpu", "version": "2.21.0"},
    )


def test_the_document_is_valid_cyclonedx_1_6(tmp_path: Path) -> None:
    text = json.dumps(make(tmp_path))
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None


def test_a_broken_document_is_refused_by_the_same_validator(tmp_path: Path) -> None:
    doc = make(tmp_path)
    doc["components"][0]["type"] = "not-a-type"  # type: ignore[index]
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(doc)) is not None


def test_components_purls_and_hashes(tmp_path: Path) -> None:
    doc = make(tmp_path)
    comps = doc["components"]
    assert isinstance(comps, list)
    purls = [PackageURL.from_string(c["purl"]) for c in comps]
    debs = [(p.name, p.version, p.qualifiers["arch"]) for p in purls if p.type == "deb"]
    # installed packages only, both architectures of libc6, the epoch kept (':' encoded)
    assert debs == [
        ("libc6", "2.36-9+deb12u4", "amd64"),
        ("libc6", "2.36-9+deb12u4", "i386"),
        ("tzdata", "1:2024a-0+deb12u1", "all"),
    ]
    python = {(p.name, p.version) for p in purls if p.type == "pypi"}
    assert python == {
        ("tensorflow", "2.21.0"),
        ("nvidia-cudnn-cu12", "9.3.0.75"),
        ("tfgpu", "0.1.0+local"),
    }
    by_name = {c["name"]: c for c in comps}
    assert by_name["nvidia-cudnn-cu12"]["hashes"] == [{"alg": "SHA-256", "content": HASH}]
    assert "hashes" not in by_name["tensorflow"]  # the base's: no wheel of the kit's
    roles = {
        c["name"]: {p["name"]: p["value"] for p in c["properties"]}.get("tfgpu:role") for c in comps
    }
    assert roles["tensorflow"] == "tensorflow" and roles["nvidia-cudnn-cu12"] == "cuda"
    refs = [c["bom-ref"] for c in comps]
    assert len(refs) == len(set(refs)) == 7  # the second tfgpu copy gets a ref of its own
    assert sbom.count(doc) == 7 and sbom.count(doc, "dpkg") == 3 and sbom.count(doc, "python") == 4


def test_the_same_content_gives_the_same_serial_number(tmp_path: Path) -> None:
    a, b = make(tmp_path), make(tmp_path)
    assert a["serialNumber"] == b["serialNumber"]
    other = make(tmp_path / "elsewhere")  # other locations: other content
    assert other["serialNumber"] != a["serialNumber"]


def test_image_record_writes_the_three_files_in_this_python(tmp_path: Path) -> None:
    # real: this interpreter's distributions (tensorflow-cpu 2.21.0) and the machine's dpkg status
    record = image_record.write(
        str(tmp_path), {"TFGPU_IMAGE_TF": "2.21.0", "TF_GPU_MEMORY_GROWTH": "true"}, "test:1"
    )
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["constraints.txt", "image-record.json", "sbom.cdx.json"]
    text = (tmp_path / "sbom.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    constraints = (tmp_path / "constraints.txt").read_text()
    assert "tensorflow-cpu==2.21.0\n" in constraints and "tfgpu==0.1.0\n" in constraints
    saved = json.loads((tmp_path / "image-record.json").read_text())
    assert saved["tensorflow"] == "2.21.0" and saved["python"] == sys.executable
    assert saved["env"] == {"TFGPU_IMAGE_TF": "2.21.0", "TF_GPU_MEMORY_GROWTH": "true"}
    assert record["sbom_counts"]["python"] > 20

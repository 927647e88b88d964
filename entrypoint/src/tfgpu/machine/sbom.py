"""What an image holds, as a CycloneDX 1.6 JSON document (an SBOM), written when the image is built.

Components: every OS package dpkg lists as installed (/var/lib/dpkg/status), every Python
distribution the image's Python sees, with its version, and, for the wheels the kit installed (the
tfgpu runtime, its extras, the NVIDIA CUDA wheels, tf-keras, the slim image's TensorFlow), the
sha256 of the wheel file, from the list the build installed them by (`installed-wheels.txt`:
`name==version --hash=sha256:…`, the build side's locks). Package URLs follow the purl spec
(`pkg:deb/debian/bash@5.2.15-2?arch=amd64&distro=debian-12`, `pkg:pypi/tensorflow@2.21.0`).

Written by hand with `json`, not with cyclonedx-python-lib: this runs inside every image build,
offline, under the base's own Python (3.8 to 3.11, arm64 too), where that library and its five
dependencies would have to be locked and shipped per Python for a document of a few fields per
component. The kit validates the result with cyclonedx-python-lib against the specification's
schema (`./kit sbom`, tests/runtime/test_sbom.py).
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

from tfgpu import __version__
from tfgpu.machine.pins import Installed, Pin, normalize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

SPEC_VERSION = "1.6"
DPKG_STATUS = "/var/lib/dpkg/status"
OS_RELEASE = "/etc/os-release"
# components' properties (CycloneDX property names are free text; a prefix keeps ours apart)
PROP_SOURCE = "tfgpu:source"  # dpkg | python
PROP_ROLE = "tfgpu:role"  # tensorflow | cuda | keras | tf-keras | runtime (the pinned set)
PROP_LOCATION = "tfgpu:location"  # where a Python distribution is installed


def _purl_part(text: str) -> str:
    # purl spec: each part percent-encoded; ':' and '+' included (a Debian epoch, a local version)
    return quote(text, safe="")


def dpkg_packages(status: str = DPKG_STATUS) -> List[Dict[str, str]]:
    """The installed packages of dpkg's status file (stanzas of `Field: value`); [] without one."""
    try:
        with open(status, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out = []
    for stanza in text.split("\n\n"):
        fields: Dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") and key:
                continue  # a continuation line (Description, Conffiles): not needed
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            out.append(fields)
    return out


def os_release(path: str = OS_RELEASE) -> Tuple[str, str]:
    """(ID, VERSION_ID) of /etc/os-release: ('debian', '12'), ('ubuntu', '22.04')."""
    values: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key] = value.strip().strip('"')
    except OSError:
        pass
    return values.get("ID", "unknown"), values.get("VERSION_ID", "unknown")


def wheel_hashes(path: str) -> Dict[Tuple[str, str], str]:
    """(normalized name, version) → sha256 of each wheel the build installed (its --hash lines)."""
    out: Dict[Tuple[str, str], str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        pin, _, rest = line.partition(" --hash=sha256:")
        name, sep, version = pin.strip().partition("==")
        if sep and rest.strip():
            out[(normalize(name), version.strip())] = rest.strip().split()[0]
    return out


def _component(
    kind: str, name: str, version: str, purl: str, props: Dict[str, str]
) -> Dict[str, Any]:
    return {
        "type": kind,
        "bom-ref": purl,
        "name": name,
        "version": version,
        "purl": purl,
        "properties": [{"name": k, "value": v} for k, v in props.items() if v],
    }


def document(
    *,
    packages: Iterable[Mapping[str, str]],
    dists: Iterable[Installed],
    pins: Iterable[Pin],
    hashes: Mapping[Tuple[str, str], str],
    distro: Tuple[str, str],
    image: Mapping[str, str],
) -> Dict[str, Any]:
    """The CycloneDX document. `image` names the image (TensorFlow version, variant facts)."""
    distro_id, distro_version = distro
    roles = {p.name: p.role for p in pins}
    components: List[Dict[str, Any]] = []
    for pkg in sorted(packages, key=lambda p: (p["Package"], p.get("Architecture", ""))):
        name, version, arch = pkg["Package"], pkg.get("Version", ""), pkg.get("Architecture", "")
        purl = (
            f"pkg:deb/{_purl_part(distro_id)}/{_purl_part(name)}@{_purl_part(version)}"
            f"?arch={_purl_part(arch)}&distro={_purl_part(f'{distro_id}-{distro_version}')}"
        )
        components.append(_component("library", name, version, purl, {PROP_SOURCE: "dpkg"}))
    for dist in sorted(dists, key=lambda d: (normalize(d.name), d.version, d.location)):
        key = normalize(dist.name)
        purl = f"pkg:pypi/{_purl_part(key)}@{_purl_part(dist.version)}"
        comp = _component(
            "library",
            dist.name,
            dist.version,
            purl,
            {
                PROP_SOURCE: "python",
                PROP_ROLE: roles.get(key, ""),
                PROP_LOCATION: dist.location,
            },
        )
        sha = hashes.get((key, dist.version))
        if sha:
            comp["hashes"] = [{"alg": "SHA-256", "content": sha}]
        components.append(comp)
    _unique_refs(components)
    body = json.dumps(components, sort_keys=True).encode()
    serial = uuid.uuid5(uuid.NAMESPACE_URL, "tfgpu-sbom:" + body.hex()[:64] + str(len(body)))
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        # the same content gives the same serial number: a rebuild's SBOM compares equal
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "tools": {
                "components": [
                    {"type": "application", "name": "tfgpu", "version": __version__},
                ]
            },
            "component": {
                "type": "container",
                "bom-ref": "image",
                "name": image.get("name", "tfgpu image"),
                "version": image.get("version", "unknown"),
                "properties": [
                    {"name": f"tfgpu:{k}", "value": v} for k, v in sorted(image.items()) if v
                ],
            },
        },
        "components": components,
    }


def _unique_refs(components: List[Dict[str, Any]]) -> None:
    """bom-refs must be unique: a second copy of one purl (a distribution installed twice, in two
    site directories) gets `#2`, `#3`…"""
    seen: Dict[str, int] = {}
    for comp in components:
        ref = comp["bom-ref"]
        seen[ref] = seen.get(ref, 0) + 1
        if seen[ref] > 1:
            comp["bom-ref"] = f"{ref}#{seen[ref]}"


def count(doc: Mapping[str, Any], source: Optional[str] = None) -> int:
    """How many components (of one source: dpkg, python) the document lists."""
    comps = doc.get("components", [])
    if source is None:
        return len(comps)
    return sum(
        1
        for c in comps
        if any(p.get("name") == PROP_SOURCE and p.get("value") == source for p in c["properties"])
    )

"""A security audit of each built kit image against its base, and the build-time hash
check of an assembled context.

Per image: no world-writable folder without the sticky bit, /tmp 1777 (and /tf/notebooks in the
Jupyter image), no setuid/setgid file added over the base, no secret-looking label or ENV value,
the default user as images/images.yaml argues it. Then a wheel altered in a context assembled by
`build.py bake --assemble` (the contexts `build` uses) is refused by pip during a real
`docker build`."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.base_standins import REGISTRY, gpu_tag
from tests.kit_images import OLDER, VERSION, build_py, take_standin

pytestmark = pytest.mark.docker

BASES = {
    "gpu": gpu_tag(VERSION),
    "gpu-jupyter": f"{REGISTRY}/tensorflow/tensorflow:{VERSION}-gpu-jupyter",
    "older": gpu_tag(OLDER),
}
# what one `find` run reports, one section per check
AUDIT = (
    "echo '== loose'; find / -xdev -type d -perm -0002 ! -perm -1000 2>/dev/null;"
    " echo '== setid'; find / -xdev -type f -perm /6000 2>/dev/null | LC_ALL=C sort;"
    " echo '== modes'; stat -c '%a %n' /tmp /tf/notebooks 2>/dev/null; true"
)
# a key or a value that looks like a credential (names, URL userinfo, common token formats)
SECRET_KEY = re.compile(r"(?i)(token|secret|passw(or)?d|api[_-]?key|credential|private[_-]?key)")
SECRET_VALUE = re.compile(
    r"(?i)://[^/\s@]+@|\b(ghp|gho|ghs|glpat|xox[bp])[-_][A-Za-z0-9_-]{8,}|\bAKIA[0-9A-Z]{16}\b"
)


def _audit(client: docker.DockerClient, image: str) -> dict[str, list[str]]:
    out = client.containers.run(
        image, ["-c", AUDIT], entrypoint="sh", user="0", remove=True, network_disabled=True
    ).decode()
    sections: dict[str, list[str]] = {}
    current = ""
    for line in out.splitlines():
        if line.startswith("== "):
            current = line[3:]
            sections[current] = []
        elif line.strip():
            sections[current].append(line.strip())
    return sections


@pytest.fixture(scope="module")
def audits(
    docker_client: docker.DockerClient, kit_images: dict[str, str]
) -> dict[str, tuple[dict[str, list[str]], dict[str, list[str]]]]:
    """Per image: (its audit, its base's audit)."""
    return {
        which: (_audit(docker_client, ref), _audit(docker_client, BASES[which]))
        for which, ref in kit_images.items()
    }


@pytest.mark.parametrize("which", ["gpu", "gpu-jupyter", "older"])
def test_no_folder_is_writable_for_all_without_the_sticky_bit(
    audits: dict[str, Any], which: str
) -> None:
    image, base = audits[which]
    assert image["loose"] == [], f"world-writable, not sticky: {image['loose']}"
    if which == "gpu-jupyter":
        assert base["loose"], "the stand-in no longer has the official base's a+rwx /tf"


@pytest.mark.parametrize("which", ["gpu", "gpu-jupyter", "older"])
def test_tmp_is_1777_and_notebooks_sticky(audits: dict[str, Any], which: str) -> None:
    image, _ = audits[which]
    modes = dict(reversed(line.split(" ", 1)) for line in image["modes"])
    assert modes["/tmp"] == "1777"  # not the staging root's 0755
    if which == "gpu-jupyter":
        assert modes["/tf/notebooks"] == "1777"


@pytest.mark.parametrize("which", ["gpu", "gpu-jupyter", "older"])
def test_no_setuid_or_setgid_file_over_the_base(audits: dict[str, Any], which: str) -> None:
    image, base = audits[which]
    assert image["setid"] == base["setid"]


@pytest.mark.parametrize("which", ["gpu", "gpu-jupyter", "older"])
def test_no_secret_looking_label_or_env(
    docker_client: docker.DockerClient, kit_images: dict[str, str], which: str
) -> None:
    config = docker_client.images.get(kit_images[which]).attrs["Config"]
    pairs = [tuple(item.split("=", 1)) for item in config.get("Env") or []]
    pairs += list((config.get("Labels") or {}).items())
    suspicious = [
        (key, value) for key, value in pairs if SECRET_KEY.search(key) or SECRET_VALUE.search(value)
    ]
    assert suspicious == []
    source = dict(config["Labels"])["org.opencontainers.image.source"]
    assert "@" not in source


def test_the_default_users_are_the_argued_ones(
    docker_client: docker.DockerClient, kit_images: dict[str, str]
) -> None:
    """images/images.yaml (user.run_as_user) argues root for -gpu, as the official images;
    Jupyter runs as the numeric non-root user."""
    users = {
        w: docker_client.images.get(r).attrs["Config"].get("User") or ""
        for w, r in kit_images.items()
    }
    assert users == {"gpu": "", "gpu-jupyter": "1000:1000", "older": ""}


def test_a_wheel_changed_in_a_kept_context_is_refused_at_build_time(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`bake --assemble --contexts DIR` writes the contexts `build` uses; a wheel altered there
    afterwards (its code changed, the archive valid) makes the real `docker build` fail in pip's
    --require-hashes."""
    take_standin(request, gpu_tag(OLDER), "older")
    contexts = tmp_path / "contexts"
    assembled = build_py(
        "bake",
        f"{OLDER}-gpu",
        "--base-registry",
        REGISTRY,
        "--assemble",
        "--contexts",
        str(contexts),
        "--out",
        str(tmp_path / "bake.json"),
    )
    assert assembled.returncode == 0, assembled.stderr
    context = contexts / f"{OLDER}-gpu"
    (wheel,) = (context / "wheels").glob("tfgpu-*.whl")
    altered = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(altered, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "tfgpu/__init__.py":
                data += b"\nimport os; os.system('touch /pwned')\n"
            dst.writestr(item, data)
    shutil.copy(altered, wheel)
    proc = subprocess.run(
        [
            "docker",
            "build",
            "--no-cache",
            "--force-rm",
            "--network",
            "none",
            "--build-arg",
            f"BASE_REGISTRY={REGISTRY}",
            "-t",
            "tfgpu-audit.local/tampered:1",
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # the build fails, so it tags nothing; should it not, the tag goes
    subprocess.run(
        ["docker", "rmi", "tfgpu-audit.local/tampered:1"], capture_output=True, check=False
    )
    assert proc.returncode != 0, "the altered wheel was installed"
    assert "DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr, proc.stdout[-3000:]

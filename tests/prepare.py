"""`./kit test-images [GROUP…] [--standins-only] [--list]` (`python -m tests.prepare`): build the
images the container tests run, before pytest (CI's step; tests/kit_images.py lists them).

First the stand-in bases of the groups (`python -m tests.base_standins`: reused when their key has
not changed), then each image with `./kit build`, the product's own command as a user runs it
(`--json`, or the people's table for one of them), one at a time, each build's output kept for the
tests that read it (tests/kit_images.py, `RECORDS`). The builds go through BuildKit: the first
`docker` CLI on PATH that has it is put first on the builds' PATH (.ci/run installs Debian's
docker.io, whose CLI has it built in); where none has it, `./kit build` says so and uses the legacy
builder. After each build BuildKit's cache is dropped: the builder stages would not fit beside the
images (docs/harness.md, "Disk"). An image whose inputs have not changed since its kept build
(the kit's sources, the build line, its stand-ins' keys, the engine: `inputs_key`) is kept, not
rebuilt; `--rebuild` builds every one. GROUP: core, cuda11, arm64 (default: all). Exit 1 on the
first build that fails, with the end of its output."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import docker

from tests.base_standins import StandinError, build_all
from tests.base_standins.l4t import build_l4t
from tests.kit_images import (
    GROUPS,
    ROOT,
    SUITE_IMAGES,
    BuildRecord,
    SuiteImage,
    buildkit_cli_on_path,
    read_record,
    write_record,
)

L4T_STANDIN = "l4t"  # built by base_standins.l4t (arm64), not by build_all


def say(message: str) -> None:
    print(f"[prepare] {message}", flush=True)


# What `./kit build` reads: the command, the kit, the image data, the templates, the committed
# Dockerfiles and the runtime copied into each image. Tests, docs and benchmarks are not inputs.
INPUTS = ("build.py", "tfgpu_kit", "images", "templates", "dockerfiles", "entrypoint")
NOT_INPUTS = ("__pycache__", ".pyc", ".egg-info", ".mypy_cache", ".ruff_cache")


def build_standins(names: list[str]) -> dict[str, str]:
    """Build (or reuse) the stand-ins `names` and those they are built FROM: each one's tag and
    key (its recipe's hash, the label `io.tfgpu.standin.key`)."""
    t0 = time.monotonic()
    x86 = [n for n in names if n != L4T_STANDIN]
    results = build_all(x86) if x86 else []
    if L4T_STANDIN in names:
        results.append(build_l4t())
    say(f"stand-ins {' '.join(names)}: ready in {time.monotonic() - t0:.0f}s")
    return {result.tag: result.key for result in results}


def sources_digest(root: Path = ROOT) -> str:
    """A hash of the paths and contents of every file under INPUTS (caches left out)."""
    digest = hashlib.sha256()
    for top in INPUTS:
        start = root / top
        files = [start] if start.is_file() else sorted(p for p in start.rglob("*") if p.is_file())
        for path in files:
            relative = path.relative_to(root).as_posix()
            if any(part in relative for part in NOT_INPUTS):
                continue
            content = path.read_bytes()
            digest.update(f"{relative}\0{len(content)}\0".encode())
            digest.update(content)
    return digest.hexdigest()


def inputs_key(arguments: list[str], standins: dict[str, str], sources: str, engine: str) -> str:
    """What one image is made from: its `./kit build` arguments, its stand-ins' tags and keys,
    the kit's sources, the engine's version. No path of this checkout: a fresh clone elsewhere
    of the same sources keeps the images."""
    blob = json.dumps([arguments, sorted(standins.items()), sources, engine])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def kept(record: BuildRecord | None, inputs: str, present: str | None) -> bool:
    """Whether the image of `record` is still what a build with `inputs` would make: the build
    succeeded from the same inputs and made the image that is under its tag now."""
    return (
        record is not None
        and record.returncode == 0
        and record.inputs == inputs
        and bool(record.image_id)
        and record.image_id == present
    )


def build_image(
    client: docker.DockerClient, image: SuiteImage, env: dict[str, str], inputs: str, rebuild: bool
) -> bool:
    command = build_command(image)
    replaced = image_id(client, image.ref)
    if not rebuild and kept(read_record(image.key), inputs, replaced):
        say(f"{image.ref}: kept, its inputs unchanged (key {inputs}) ({image.line()})")
        return True
    t0 = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    made = image_id(client, image.ref) if done.returncode == 0 else None
    record = BuildRecord(command, done.returncode, done.stdout, done.stderr, inputs, made or "")
    write_record(image.key, record)
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        say(f"FAILED ({done.returncode}) after {seconds:.0f}s: {image.line()}")
        print(done.stderr[-6000:], file=sys.stderr, flush=True)
        return False
    dropped = drop_replaced(client, replaced, image.ref)
    say(f"{image.ref}: {seconds:.0f}s, {dropped}{drop_build_cache(client)} ({image.line()})")
    return True


def build_arguments(image: SuiteImage) -> list[str]:
    """`./kit build`'s arguments for `image` (`--json`, or the people's table)."""
    return ["build", *image.build, *([] if image.table else ["--json"])]


def build_command(image: SuiteImage) -> list[str]:
    return [sys.executable, str(ROOT / "build.py"), *build_arguments(image)]


def image_id(client: docker.DockerClient, ref: str) -> str | None:
    try:
        return str(client.images.get(ref).id)
    except docker.errors.ImageNotFound:
        return None


def drop_replaced(client: docker.DockerClient, replaced: str | None, ref: str) -> str:
    """Remove the image a build replaced under `ref`, by its id and only when no tag is left on
    it: a rebuilt repaired image leaves its predecessor (3 GB and more) untagged. Not a prune of
    every dangling image: the stand-ins building beside it (the legacy builder) have untagged
    images of their own mid-build."""
    if replaced is None or replaced == image_id(client, ref):
        return ""
    try:
        if client.images.get(replaced).tags:
            return ""
        client.images.remove(replaced)
        return "the image it replaced removed, "
    except docker.errors.APIError as exc:  # gone already, or a container still uses it
        return f"the image it replaced kept ({exc.explanation or exc}), "


def drop_build_cache(client: docker.DockerClient) -> str:
    """Drop BuildKit's cache of the build just made: a repaired image's builder stage (its wheels
    copied and installed, about 8 GB) is not part of the image, and every image the suite runs
    is on the disk at once (docs/harness.md, "Disk"). What it frees, said."""
    freed = int(client.api.prune_builds(all=True).get("SpaceReclaimed") or 0)
    return f"its build cache dropped ({freed / 2**30:.1f} GiB)"


def builds_env() -> dict[str, str]:
    """The environment of the builds: PATH with a BuildKit-capable `docker` first, when one is."""
    env = {**os.environ, "NO_COLOR": "1"}
    cli = buildkit_cli_on_path()
    if cli is None:
        say("no `docker` CLI on PATH builds through BuildKit: ./kit build uses the legacy builder")
        return env
    say(f"BuildKit through {cli}")
    env["PATH"] = os.pathsep.join([str(Path(cli).parent), env.get("PATH", "")])
    return env


def disk_line(client: docker.DockerClient) -> str:
    """The free space where the engine keeps its images (the engine is local)."""
    free = shutil.disk_usage(str(client.info()["DockerRootDir"])).free
    return f"{free / 2**30:.1f} GiB free on the engine's disk"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./kit test-images",
        description="Build the stand-in bases and the images the container tests run.",
    )
    parser.add_argument("groups", nargs="*", metavar="|".join(GROUPS), help="default: all")
    parser.add_argument(
        "--standins-only", action="store_true", help="build the groups' stand-ins, no image"
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="build every image, also those whose inputs have not changed since their last build",
    )
    parser.add_argument("--list", action="store_true", help="print the build lines and exit")
    args = parser.parse_args(argv)
    if unknown := set(args.groups) - set(GROUPS):
        parser.error(f"unknown group(s): {', '.join(sorted(unknown))}; known: {', '.join(GROUPS)}")
    groups = args.groups or list(GROUPS)
    images = [image for image in SUITE_IMAGES if image.group in groups]
    if args.list:
        for image in images:
            print(f"{image.group:>7}  {image.key:<13} {image.line()}")
        return 0
    t0 = time.monotonic()
    standins = list(dict.fromkeys(name for image in images for name in image.standins))
    try:
        build_standins(standins)
        if args.standins_only:
            return 0
        return 0 if build_images(images, args.rebuild) else 1
    except StandinError as exc:
        say(f"stand-ins: {exc}")
        return 1
    finally:
        say(f"{', '.join(groups)}: done in {time.monotonic() - t0:.0f}s")


def build_images(images: list[SuiteImage], rebuild: bool) -> bool:
    """Build (or keep) each image in turn; False at the first that fails."""
    env = builds_env()
    sources = sources_digest()
    client = docker.from_env(timeout=600)
    try:
        engine = str(client.version().get("Version", ""))
        for image in images:
            # its own stand-ins and those they are built FROM (up to date: a check of their keys)
            own = build_standins(list(image.standins))
            inputs = inputs_key(build_arguments(image), own, sources, engine)
            if not build_image(client, image, env, inputs, rebuild):
                return False
        say(f"{len(images)} images ready; {disk_line(client)}")
        return True
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())

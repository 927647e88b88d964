"""`./kit test-images [GROUP…] [--standins-only] [--list]` (`python -m tests.prepare`): build the
images the container tests run, before pytest (CI's step; tests/kit_images.py lists them).

First the stand-in bases of the groups (`python -m tests.base_standins`: reused when their key has
not changed), then each image with `./kit build`, the product's own command as a user runs it
(`--json`, or the people's table for one of them), one at a time, each build's output kept for the
tests that read it (tests/kit_images.py, `RECORDS`). The builds go through BuildKit: the first
`docker` CLI on PATH that has it is put first on the builds' PATH (.ci/run installs Debian's
docker.io, whose CLI has it built in); where none has it, `./kit build` says so and uses the legacy
builder. After each build BuildKit's cache is dropped: the builder stages would not fit beside the
images (docs/harness.md, "Disk"). GROUP: core, cuda11, arm64 (default: all). Exit 1 on the first
build that fails, with the end of its output."""

from __future__ import annotations

import argparse
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
    write_record,
)

L4T_STANDIN = "l4t"  # built by base_standins.l4t (arm64), not by build_all


def say(message: str) -> None:
    print(f"[prepare] {message}", flush=True)


def build_standins(names: list[str]) -> None:
    t0 = time.monotonic()
    x86 = [n for n in names if n != L4T_STANDIN]
    if x86:
        build_all(x86)
    if L4T_STANDIN in names:
        build_l4t()
    say(f"stand-ins {' '.join(names)}: ready in {time.monotonic() - t0:.0f}s")


def build_image(client: docker.DockerClient, image: SuiteImage, env: dict[str, str]) -> bool:
    command = [sys.executable, str(ROOT / "build.py"), "build", *image.build]
    command += [] if image.table else ["--json"]
    replaced = image_id(client, image.ref)
    t0 = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    write_record(image.key, BuildRecord(command, done.returncode, done.stdout, done.stderr))
    seconds = time.monotonic() - t0
    if done.returncode != 0:
        say(f"FAILED ({done.returncode}) after {seconds:.0f}s: {image.line()}")
        print(done.stderr[-6000:], file=sys.stderr, flush=True)
        return False
    dropped = drop_replaced(client, replaced, image.ref)
    say(f"{image.ref}: {seconds:.0f}s, {dropped}{drop_build_cache(client)} ({image.line()})")
    return True


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
    except StandinError as exc:
        say(f"stand-ins: {exc}")
        return 1
    if args.standins_only:
        return 0
    env = builds_env()
    client = docker.from_env(timeout=600)
    try:
        for image in images:
            if not build_image(client, image, env):
                return 1
        say(f"{', '.join(groups)}: {len(images)} images in {time.monotonic() - t0:.0f}s; "
            f"{disk_line(client)}")  # fmt: skip
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

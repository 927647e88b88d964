#!/usr/bin/env python3
"""Image weight and the cost of a first GPU: printed, not asserted.

For each image given (default: the kit's repaired 2.21 image and the base it was built FROM, read
from its `org.opencontainers.image.base.name` label; add the slim one with another --image):
1. size: the engine's uncompressed `Size`; each kit image against the first kit image given (the
   slim one against the repaired one) and what it adds over its own base when that is one of the
   images (its Size less the base's). An image's base is found by content, not by label: the
   image among those given whose layers (the engine's `RootFS.Layers` diff IDs) are the longest
   proper prefix of its own. Then the gzip-compressed size of its layers as a registry would store
   them (one `docker save` of all, each unique layer tar gzip-compressed at zlib's default level
   6, which is Go's gzip.DefaultCompression, in a pool of os.cpu_count() threads, each reading its
   layer from the saved tar itself): the whole (a layer held twice counted once: they are
   content-addressed) and what it adds over its own base: its layers past the base's, less any
   the base holds. --added-only measures only what the images add over their bases (an image
   without one among them: all its layers); the bases themselves are then not measured;
2. `import tensorflow` through the image's entrypoint (the hook runs inside the import and applies
   the cap), and the first GPU device ready (`tf.config.list_logical_devices("GPU")` returned: the
   runtime has started and TensorFlow created its device with the cap), both from the script's
   start, on the fake NVIDIA driver (tests/gpu/harness.py); medians of --runs cold containers.
What the engine reports as Size is the same on every storage driver; compressed sizes depend on
the compression level, so they are estimates of a registry's, stated with it. `docker save`
writes the images' unique layers, uncompressed, to the temporary directory (TMPDIR): their sum
(at least the largest image's Size) must be free there; nothing else is extracted.

Run: .venv/bin/python benchmarks/bench_images.py [--image REF …] [--runs N]
     [--no-compressed | --added-only]
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import statistics
import subprocess
import sys
import tarfile
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from tests.gpu.harness import GpuHost  # noqa: E402

DEFAULT_IMAGE = "tfgpu/tensorflow:2.21.0-gpu"
PROBE = (
    "import time; t0 = time.perf_counter(); import tensorflow as tf; t1 = time.perf_counter(); "
    "gpus = tf.config.list_logical_devices('GPU'); t2 = time.perf_counter(); "
    "print('BENCH', t1 - t0, t2 - t0, len(gpus))"
)
# zlib's default level, which is Go's gzip.DefaultCompression: what `docker push` stores
GZIP_LEVEL = 6
CHUNK = 1 << 20
KIT_LABEL = "io.tfgpu.tensorflow"


def _gzip_size(path: Path, offset: int, length: int) -> int:
    """Bytes of `length` bytes of the file `path` from `offset`, once gzip-compressed at
    GZIP_LEVEL. Each call opens the file itself, so calls run in threads side by side (zlib
    releases the GIL while it compresses), a chunk at a time in memory."""
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip framing
    size = 0
    with path.open("rb") as stream:
        stream.seek(offset)
        while length > 0:
            chunk = stream.read(min(CHUNK, length))
            if not chunk:
                raise EOFError(f"{path}: ends before its layer at {offset} does")
            length -= len(chunk)
            size += len(packer.compress(chunk))
    return size + len(packer.flush())


def bases(chains: dict[str, list[str]]) -> dict[str, str | None]:
    """Per image, its base among the images: the one whose diff IDs are the longest proper prefix
    of its own (the first given among equals), or None."""
    found: dict[str, str | None] = {}
    for ref, chain in chains.items():
        below = [b for b, c in chains.items() if len(c) < len(chain) and chain[: len(c)] == c]
        found[ref] = max(below, key=lambda b: len(chains[b]), default=None)
    return found


def compressed_layers(
    refs: list[str], ids: dict[str, str], needed: dict[str, int] | None
) -> dict[str, list[tuple[str, int | None]]]:
    """Per image, its layers in order as [(layer path in the saved tar, its gzip size)], from one
    `docker save` of all. `ids`: each image's ID; `needed`: per image, the first of its layers to
    measure (the others' sizes are None), or None to measure all."""
    with tempfile.TemporaryDirectory() as work:
        saved = Path(work) / "saved.tar"
        with saved.open("wb") as out:
            # the CLI: docker-py's get_image saves one image, and shared layers would be read twice
            subprocess.run(["docker", "save", *refs], stdout=out, check=True)
        with tarfile.open(saved, mode="r:") as archive:
            manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
            # an entry's Config is <ID>.json (docker save's own format) or blobs/sha256/<ID> (OCI)
            by_id = {posixpath.basename(e["Config"]).removesuffix(".json"): e for e in manifest}
            order = {ref: by_id[ids[ref].removeprefix("sha256:")]["Layers"] for ref in refs}
            start = needed or {}
            wanted = {layer for ref in refs for layer in order[ref][start.get(ref, 0) :]}
            spans: dict[str, tuple[int, int]] = {}  # a layer's tar: (its offset, its length)
            links: dict[str, str] = {}  # docker save links a layer it holds twice to the first
            for member in archive:
                if member.isfile():  # all: a layer wanted may link to one that is not
                    spans[member.name] = (member.offset_data, member.size)
                elif member.issym() or member.islnk():
                    base = posixpath.dirname(member.name) if member.issym() else ""
                    links[member.name] = posixpath.normpath(posixpath.join(base, member.linkname))

        def target(layer: str) -> str:
            while layer in links:
                layer = links[layer]
            return layer

        unique = sorted({target(layer) for layer in wanted}, key=lambda x: -spans[x][1])
        # largest first: the pool is busy to the end; each thread reads its own layer's bytes
        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            gzipped = pool.map(lambda layer: _gzip_size(saved, *spans[layer]), unique)
            sizes = dict(zip(unique, gzipped, strict=True))
    return {
        ref: [
            (layer, sizes[target(layer)] if i >= start.get(ref, 0) else None)
            for i, layer in enumerate(order[ref])
        ]
        for ref in refs
    }


def first_gpu(host: GpuHost, image: str, runs: int) -> tuple[float, float]:
    """Medians of (import tensorflow, the first GPU device ready), in seconds from the script's
    start (the hook applies the cap inside the import, so the device may exist before it ends)."""
    imports, creations = [], []
    for _ in range(runs):
        run = host.run(image, ["python", "-c", PROBE], {"TF_GPU_MEM_LIMIT": "2048"})
        line = next((x for x in run.stdout.splitlines() if x.startswith("BENCH ")), None)
        if run.exit_code != 0 or line is None:
            raise SystemExit(f"{image}: the probe failed (exit {run.exit_code}):\n{run.tail()}")
        _, imported, created, count = line.split()
        if int(count) < 1 or not run.created:
            why = "TensorFlow created no GPU on the fake driver"
            raise SystemExit(f"{image}: {why}:\n{run.tail()}")
        imports.append(float(imported))
        creations.append(float(created))
    host.remove_all()
    return statistics.median(imports), statistics.median(creations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", action="append", help=f"default: {DEFAULT_IMAGE} and its base")
    parser.add_argument("--runs", type=int, default=5, help="cold containers per image (5)")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--no-compressed", action="store_true", help="skip the docker save part")
    part.add_argument(
        "--added-only",
        action="store_true",
        help="compress only what each image adds over its base (the bases: not measured)",
    )
    args = parser.parse_args()
    client = docker.from_env(timeout=1800)
    images = args.image or [DEFAULT_IMAGE]
    base = client.images.get(images[0]).labels.get("org.opencontainers.image.base.name")
    refs = ([base] if base and not args.image else []) + images
    first = refs[0]
    print(f"images: {', '.join(refs)}; runs per image: {args.runs}")
    attrs = {ref: client.images.get(ref).attrs for ref in refs}
    size = {ref: int(attrs[ref]["Size"]) for ref in refs}
    chains = {ref: list(attrs[ref]["RootFS"].get("Layers") or []) for ref in refs}
    own = bases(chains)  # by content: the longest proper prefix of its diff IDs
    kits = [r for r in refs if KIT_LABEL in (attrs[r]["Config"].get("Labels") or {})]
    print("\n1. size (engine Size, uncompressed; ratio against the first image)")
    for ref in refs:
        print(f"   {ref:60s} {size[ref] / 1e9:6.2f} GB   {size[ref] / size[first]:5.2f}x")
    for ref in kits[1:]:
        ratio = size[ref] / size[kits[0]]
        print(f"   {ref}: {ratio:.2f}x {kits[0]} ({1 - ratio:.0%} smaller)")
    for ref in kits:
        if below := own[ref]:
            print(f"   {ref}: adds {(size[ref] - size[below]) / 1e9:.2f} GB over {below}")
    if not args.no_compressed:
        what = "; --added-only: what each adds over its base" if args.added_only else ""
        print(f"\n   compressed layers (gzip level {GZIP_LEVEL}; docker save{what})", flush=True)
        # an image's layers in the saved tar are in the order of its diff IDs: what it adds over
        # its base are those from the base's count on
        held = {b for b in own.values() if b}  # the images that are another's base
        start = {r: len(chains[r] if r in held else chains.get(own[r] or "", [])) for r in refs}
        ids = {ref: attrs[ref]["Id"] for ref in refs}
        layers = compressed_layers(refs, ids, start if args.added_only else None)
        for ref in refs:
            paths = [layer for layer, _ in layers[ref]]
            count = f"{len(paths)} layers"
            if below := own[ref]:
                theirs = {layer for layer, _ in layers[below]}
                added = dict(layers[ref][len(chains[below]) :])
                over = sum(v or 0 for k, v in added.items() if k not in theirs)
                count += f" ({over / 1e9:.2f} GB over {below})"
            if any(v is None for _, v in layers[ref]):
                print(f"   {ref:60s} not measured (--added-only), {count}")
            else:
                total = sum(dict(layers[ref]).values())  # type: ignore[arg-type]
                print(f"   {ref:60s} {total / 1e9:6.2f} GB, {count}")
    print(
        "\n2. import tensorflow, and the first GPU device ready (its cap applied), from the"
        " script's start (fake NVIDIA driver; medians)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as work:
        host = GpuHost(client, real=False, workdir=Path(work))
        for ref in kits:  # not the bases: the official one cannot use its GPU (the repair's reason)
            imported, created = first_gpu(host, ref, args.runs)
            print(f"   {ref:60s} import {imported:5.2f} s, GPU device ready {created:5.2f} s")


if __name__ == "__main__":
    main()

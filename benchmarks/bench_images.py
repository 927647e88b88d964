#!/usr/bin/env python3
"""Image weight and the cost of a first GPU (issue 20, item 3): printed, not asserted.

For each image given (default: the kit's repaired 2.21 image and the base it was built FROM, read
from its `org.opencontainers.image.base.name` label; add the slim one with another --image):
1. size: the engine's uncompressed `Size`, and the gzip-compressed size of its layers as a
   registry would store them (`docker save`, each layer tar gzip-compressed at zlib's default
   level 6, which is Go's gzip.DefaultCompression), the whole and what it adds over its own base
   when that is one of the images (layers it shares are counted once: they are content-addressed);
   and each kit image against the first kit image given (the slim one against the repaired one);
2. `import tensorflow` through the image's entrypoint (the hook runs inside the import and applies
   the cap), and the first GPU device ready (`tf.config.list_logical_devices("GPU")` returned: the
   runtime has started and TensorFlow created its device with the cap), both from the script's
   start, on the fake NVIDIA driver (tests/gpu/harness.py); medians of --runs cold containers.
What the engine reports as Size is the same on every storage driver; compressed sizes depend on
the compression level, so they are estimates of a registry's, stated with it.

Run: .venv/bin/python benchmarks/bench_images.py [--image REF …] [--runs N] [--no-compressed]
"""

from __future__ import annotations

import argparse
import json
import posixpath
import statistics
import subprocess
import sys
import tarfile
import tempfile
import zlib
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
GZIP_LEVEL = 6
CHUNK = 1 << 20


def _gzip_size(stream: object) -> int:
    """Bytes of `stream` (a file object) once gzip-compressed at GZIP_LEVEL."""
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip framing
    size = 0
    while chunk := stream.read(CHUNK):  # type: ignore[attr-defined]
        size += len(packer.compress(chunk))
    return size + len(packer.flush())


def compressed_layers(refs: list[str]) -> dict[str, dict[str, int]]:
    """Per image, {layer path in the saved tar: its gzip size}, from one `docker save` of all."""
    sizes: dict[str, int] = {}
    with tempfile.TemporaryFile() as saved:
        # the CLI: docker-py's get_image saves one image, and shared layers would be read twice
        subprocess.run(["docker", "save", *refs], stdout=saved, check=True)
        saved.seek(0)
        with tarfile.open(fileobj=saved, mode="r:") as archive:
            manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
            wanted = {layer for entry in manifest for layer in entry["Layers"]}
            links: dict[str, str] = {}  # docker save links a layer it holds twice to the first
            for member in archive:
                layer = member.name in wanted or member.name.endswith("/layer.tar")
                if member.isfile() and layer:
                    sizes[member.name] = _gzip_size(archive.extractfile(member))
                elif member.issym():
                    target = posixpath.normpath(
                        posixpath.join(posixpath.dirname(member.name), member.linkname)
                    )
                    links[member.name] = target
    for name, target in links.items():
        sizes[name] = sizes[target]
    by_tag = {tag: entry["Layers"] for entry in manifest for tag in entry.get("RepoTags") or []}
    return {ref: {layer: sizes[layer] for layer in by_tag[ref]} for ref in refs}


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
    parser.add_argument("--no-compressed", action="store_true", help="skip the docker save part")
    args = parser.parse_args()
    client = docker.from_env(timeout=1800)
    images = args.image or [DEFAULT_IMAGE]
    base = client.images.get(images[0]).labels.get("org.opencontainers.image.base.name")
    refs = ([base] if base and not args.image else []) + images
    first = refs[0]
    print(f"images: {', '.join(refs)}; runs per image: {args.runs}")
    size = {ref: int(client.images.get(ref).attrs["Size"]) for ref in refs}
    print("\n1. size (engine Size, uncompressed; ratio against the first image)")
    for ref in refs:
        print(f"   {ref:60s} {size[ref] / 1e9:6.2f} GB   {size[ref] / size[first]:5.2f}x")
    kits = [r for r in refs if "io.tfgpu.tensorflow" in (client.images.get(r).labels or {})]
    for ref in kits[1:]:
        ratio = size[ref] / size[kits[0]]
        print(f"   {ref}: {ratio:.2f}x {kits[0]} ({1 - ratio:.0%} smaller)")
    if not args.no_compressed:
        print(f"\n   compressed layers (gzip level {GZIP_LEVEL}; docker save)", flush=True)
        layers = compressed_layers(refs)
        for ref in refs:
            total = sum(layers[ref].values())
            # over its own base when that is one of the images (its label names it)
            own = client.images.get(ref).labels.get("org.opencontainers.image.base.name", "")
            own = own if own in layers else ""
            added = sum(v for k, v in layers[ref].items() if k not in set(layers.get(own, {})))
            over = f" ({added / 1e9:.2f} GB over {own})" if own else ""
            print(f"   {ref:60s} {total / 1e9:6.2f} GB, {len(layers[ref])} layers{over}")
    print(
        "\n2. import tensorflow, and the first GPU device ready (its cap applied), from the"
        " script's start (fake NVIDIA driver; medians)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as work:
        host = GpuHost(client, real=False, workdir=Path(work))
        for ref in refs:
            if "io.tfgpu.tensorflow" not in (client.images.get(ref).labels or {}):
                continue  # a base: the official one cannot use its GPU (the repair's reason)
            imported, created = first_gpu(host, ref, args.runs)
            print(f"   {ref:60s} import {imported:5.2f} s, GPU device ready {created:5.2f} s")


if __name__ == "__main__":
    main()

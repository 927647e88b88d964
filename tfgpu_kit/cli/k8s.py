"""`build.py k8s`: Kubernetes manifests (a serving Deployment, a training Job, and an
optional device-plugin time-slicing ConfigMap) for an image built by the kit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfgpu_kit import k8s
from tfgpu_kit.cli.command import Command, request
from tfgpu_kit.k8s.flags import Flags, option, table

NAME = "k8s"
HELP = (
    "render Kubernetes manifests (Deployment, Job, time-slicing ConfigMap, PodMonitor) for a kit "
    "image"
)

DESCRIPTION = """\
Render Kubernetes manifests for an image built by the kit: a Deployment that serves
a model and a Job that trains one, each with the kit's environment contract
(TF_GPU_MEM_LIMIT, TF_GPU_MEMORY_GROWTH, …), nvidia.com/gpu limits, probes, a
non-root securityContext, resource requests and a shutdown that lets the process end
and give its GPU memory back (preStop, terminationGracePeriodSeconds); with
--time-slicing also the NVIDIA device-plugin ConfigMap that lets several capped pods
share each GPU; with --pod-monitor a Prometheus Operator PodMonitor for the metrics
port. Check the result with `./kit plan FILE --gpu-memory SIZE`."""

EPILOG = """\
examples:
  ./kit k8s --name text --mem-limit 6GiB --serve-cmd "python serve.py" > text.yaml
  ./kit k8s --kind job --name train --mem-limit 10GiB --train-cmd "python train.py --epochs 5"
  ./kit k8s --name small --mem-limit 3GiB --time-slicing 4 --replicas 4 --out k8s/
  ./kit k8s --name text --mem-limit 6GiB --pod-monitor --pod-monitor-label release=prom
  ./kit k8s --kind job --name big --workers 2 --ps 1 --jobset --queue team-a --out k8s/
  ./kit k8s --kind job --name bert --workers 4 --trainer --queue team-a --out k8s/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the parser (cli/__init__.py) sets DESCRIPTION, the exit codes are the epilog; examples first.
    parser.epilog = EPILOG + "\n" + (parser.epilog or "")
    flags = table()
    # the groups in the order of their first flags, each flag in the table's order
    titles = dict.fromkeys(flag.group for flag in flags.values())
    groups = {title: parser.add_argument_group(title) for title in titles}
    for name, flag in flags.items():
        groups[flag.group].add_argument(option(name), **flag.arguments)


def run(args: argparse.Namespace) -> int:
    outputs = k8s.manifests(request(Flags, args))
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        for filename, text in outputs:
            (folder / filename).write_text(text, encoding="utf-8")
            sys.stdout.write(f"{folder / filename}\n")
    else:
        sys.stdout.write("---\n".join(text for _, text in outputs))
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)

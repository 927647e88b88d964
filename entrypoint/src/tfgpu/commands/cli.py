"""The `tfgpu` command: `run`, `show`, `check`, `server`. Never shows a traceback to the user."""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import sys

from tfgpu import __version__
from tfgpu.contract.errors import EXIT_BROKEN, EXIT_USAGE, TfgpuError, printable

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    import argparse
    from typing import List, Optional

RUN_HELP = """\
Validate the TF_GPU_* environment, check the driver and GPUs (no TensorFlow import),
print a short summary on stderr, then exec COMMAND with the translated environment, so it
keeps this PID, receives signals directly, and its exit code is the container's.
As PID 1 (a container without --init) tfgpu stays as a minimal init instead: it forks,
forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2/SIGWINCH, reaps zombies and exits
with the command's status. With no COMMAND it starts an interactive shell.
A TF_GPU_*/TFGPU_* variable the kit does not know (a typo: TF_GPU_MEM_LMIT) gets a warning
naming the closest known one; it changes nothing.
Exit codes: the command's; 78 bad configuration; 69 TF_GPU_REQUIRED=true and no usable GPU;
75 the recovery rule found the command stuck at its memory cap (TF_GPU_RECOVER_ACTION=exit:
its Python process exits 75, a restart policy restarts it); 126 command cannot be executed;
127 command not found."""


CHECK_HELP = """\
Is the GPU set-up working? Imports TensorFlow in a child process, applies the settings, and
reports the driver, GPUs, CUDA/cuDNN libraries and the hook. Exit 0 ok, 1 broken, 78 bad
configuration.

--build is the guard for images built FROM a tfgpu image (RUN tfgpu check --build after your
own layers): it needs no GPU and compares the image with the record its tfgpu build wrote
(/usr/share/tfgpu): pinned packages (TensorFlow, its CUDA/cuDNN wheels, Keras, tf-keras, tfgpu)
and their files, the CUDA/cuDNN libraries TensorFlow loads, the hook in every Python on PATH,
the image's environment, and what this USER can write. Exit 0 as built, 1 broken."""


SERVER_HELP = """\
Parameter-server training (TF_GPU_PS): start this pod's TensorFlow gRPC server, as a worker or
parameter server, and wait. The task comes from TF_CONFIG (the one the kit builds from TF_GPU_PS,
TF_GPU_WORKERS, TF_GPU_WORKER_HOSTS, TF_GPU_PS_HOSTS, TF_GPU_CHIEF_HOST, TF_GPU_ROLE and the index,
or your own). The chief runs your training program (ParameterServerStrategy with a
ClusterCoordinator) instead. TensorFlow is imported, so the GPU caps apply first; a parameter
server sees no GPU unless TF_GPU_PS_GPUS=true. Exit 78: no cluster, a chief or evaluator task, or
a cluster without parameter servers."""


def build_parser() -> "argparse.ArgumentParser":
    import argparse

    parser = argparse.ArgumentParser(
        prog="tfgpu",
        description="Configure TensorFlow's GPU memory from TF_GPU_* environment variables.",
        epilog="Exit codes: 0 ok, 1 check found a problem, 2 usage, 69 GPU required but "
        "unavailable, 75 stuck at the memory cap (TF_GPU_RECOVER_ACTION=exit, from the "
        "program's Python), 78 bad configuration. See docs/runtime.md.",
    )
    parser.add_argument("--version", action="version", version=f"tfgpu {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="validate, preflight, then exec a command (the image's entrypoint)",
        description=RUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="tfgpu run [-h] -- [COMMAND [ARG ...]]",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="the command to run, after --")
    for name, text in (
        ("show", "the effective settings and where each came from (no TensorFlow import)"),
        ("check", "is the GPU set-up working? imports TensorFlow in a child process"),
    ):
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser(
        "server",
        help="a worker's or parameter server's TensorFlow server (parameter-server training)",
        description=SERVER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check = sub.choices["check"]
    check.description = CHECK_HELP
    check.formatter_class = argparse.RawDescriptionHelpFormatter
    guard = check.add_argument_group("in a Dockerfile FROM a tfgpu image (--build)")
    guard.add_argument(
        "--build",
        action="store_true",
        help="no GPU, no TensorFlow import: fail (exit 1) when the layers above the tfgpu image "
        "broke its GPU path (docs/teams.md)",
    )
    guard.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PATH",
        help="with --build: the Python your image runs (default: python3 and python on PATH); "
        "repeatable",
    )
    guard.add_argument(
        "--accept",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="with --build: a pinned package you changed on purpose (then a warning); repeatable",
    )
    # internal: the run of --build under the image's own Python (tfgpu.commands.build_check.check)
    guard.add_argument("--as-recorded", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: "Optional[List[str]]" = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        # Fast path for the image entrypoint (`tfgpu run -- CMD`): no argparse import.
        if len(argv) >= 2 and argv[:2] == ["run", "--"]:
            # ~11 ms (-X importtime) that show and check need not pay
            from tfgpu.commands.run import run

            return run(argv[2:])
        return _dispatch(build_parser(), argv)
    except TfgpuError as e:
        sys.stderr.write(f"tfgpu: error: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: still no traceback, but say how to get one
        what = printable(str(e))[:500]  # it may quote user text: one line, never a forged one
        sys.stderr.write(
            f"tfgpu: internal error: {type(e).__name__}: {what} (please report it; "
            "TF_GPU_CONFIG=off bypasses the kit)\n"
        )
        return EXIT_BROKEN


def _dispatch(parser: "argparse.ArgumentParser", argv: "List[str]") -> int:
    args = parser.parse_args(argv)
    if args.command == "run":
        command = list(args.argv)
        if command[:1] == ["--"]:
            command = command[1:]
        from tfgpu.commands.run import run  # ~11 ms (-X importtime); each command imports its own

        return run(command)
    if args.command == "show":
        from tfgpu.commands.show import show  # ~25 ms (-X importtime), not for `tfgpu run`

        return show(as_json=args.json)
    if args.command == "server":
        # ~11 ms (-X importtime, 9-13 measured), not for `tfgpu run`
        from tfgpu.commands.server import serve

        return serve()
    if args.command == "check":
        if args.build:
            from tfgpu.commands.build_check import check as check_build  # ~39 ms (-X importtime)

            return check_build(
                as_json=args.json,
                pythons=args.python,
                accept=args.accept,
                argv=None if args.as_recorded else argv,
            )
        if args.python or args.accept:
            parser.error("--python and --accept go with --build")
        from tfgpu.commands.gpu_check import check  # ~55 ms (-X importtime), not for `tfgpu run`

        return check(as_json=args.json)
    parser.print_help(sys.stderr)
    return EXIT_USAGE

"""build.py's command line: argparse, one module per sub-command under tfgpu_kit/commands/.

Each command module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`. To add a
command, add its module name to COMMANDS. Data goes to stdout, logs to stderr; a KitError prints its
message (no traceback) and exits with its code (tfgpu_kit/errors.py)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from tfgpu_kit import log as kitlog
from tfgpu_kit.errors import EXIT_IO, EXIT_USAGE, KitError

# Sub-commands, in --help order: module names under tfgpu_kit.commands.
COMMANDS: tuple[str, ...] = (
    "matrix",
    "check",
    "render",
    "build",
    "verify",
    "bake",
    "lock",
    "plan",
    "k8s",
)

EPILOG = """exit codes: 0 ok; 1 negative verdict (cannot run, stale files, failed verify, over
budget);
2 usage; 3 invalid spec under images/; 4 Docker engine unreachable or a build/push failed;
5 a file or folder named cannot be read or written"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        kitlog.stderr.print(f"error: {message}", style="red", highlight=False)
        raise SystemExit(EXIT_USAGE)


def load_commands(names: Sequence[str] = COMMANDS) -> list[ModuleType]:
    return [importlib.import_module(f"tfgpu_kit.commands.{name}") for name in names]


def parser(commands: list[ModuleType]) -> argparse.ArgumentParser:
    top = _Parser(
        prog="build.py",
        description="Build TensorFlow GPU images with the tfgpu runtime inside",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    subs = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subs.required = True
    for module in commands:
        sub = subs.add_parser(
            module.NAME,
            help=module.HELP,
            description=getattr(module, "DESCRIPTION", module.HELP),
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(load_commands()).parse_args(argv)
    kitlog.setup(verbose=args.verbose)
    try:
        return int(args._run(args))
    except KitError as exc:
        kitlog.stderr.print(f"error: {exc}", style="red", highlight=False, markup=False)
        return exc.exit_code
    except OSError as exc:
        # A path the user named (--out, a plan file, a context dir) that cannot be read or written:
        # say which and why, without a traceback. Docker's own errors are DockerError already.
        where = f"{exc.filename}: " if exc.filename else ""
        kitlog.stderr.print(
            f"error: {where}{exc.strerror or exc}", style="red", highlight=False, markup=False
        )
        return EXIT_IO
    except KeyboardInterrupt:
        logging.getLogger(__name__).warning("interrupted")
        return 130

"""build.py's command line: the argparse parser here, one module per sub-command beside it.

Each command module ends with `COMMAND = Command(...)` (tfgpu_kit/cli/command.py); to add a
command, import its module here and add it to COMMANDS. Data goes to stdout, logs to stderr; a
KitError prints its message (no traceback) and exits with its code (tfgpu_kit/shared/errors.py)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tfgpu_kit.cli import (
    bake,
    build,
    driver_check,
    k8s,
    lock,
    matrix,
    plan,
    render,
    sbom,
    verify,
)
from tfgpu_kit.cli.command import Command
from tfgpu_kit.shared import log as kitlog
from tfgpu_kit.shared.errors import EXIT_IO, EXIT_USAGE, KitError
from tfgpu_kit.shared.yamlfile import shown

# Sub-commands, in --help order.
COMMANDS: tuple[Command, ...] = (
    matrix.COMMAND,
    driver_check.COMMAND,
    render.COMMAND,
    build.COMMAND,
    verify.COMMAND,
    sbom.COMMAND,
    bake.COMMAND,
    lock.COMMAND,
    plan.COMMAND,
    k8s.COMMAND,
)

# One code a line: the help formatters keep these line breaks (RawDescriptionHelpFormatter).
EPILOG = """exit codes:
  0  ok
  1  negative verdict (cannot run, stale files, failed verify, over budget)
  2  usage: a bad flag or value
  3  invalid spec under images/
  4  Docker engine unreachable, or a build or push failed
  5  a file or folder named cannot be read or written"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        kitlog.stderr.print(f"error: {message}", style="red", highlight=False)
        raise SystemExit(EXIT_USAGE)


def parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    top = _Parser(
        prog="build.py",
        description="Build TensorFlow GPU images with the tfgpu runtime inside",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    subs = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subs.required = True
    for command in commands:
        sub = subs.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
        command.add_arguments(sub)
        sub.set_defaults(_run=command.run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    kitlog.setup(verbose=args.verbose)
    try:
        return int(args._run(args))
    except KitError as exc:
        kitlog.stderr.print(f"error: {exc}", style="red", highlight=False, markup=False)
        return exc.exit_code
    except OSError as exc:
        # A path the user named (--out, a plan file, a context dir) that cannot be read or written:
        # say which and why, without a traceback. Docker's own errors are DockerError already.
        # The name is escaped: it may hold a newline or a terminal escape.
        where = f"{shown(str(exc.filename))}: " if exc.filename else ""
        kitlog.stderr.print(
            f"error: {where}{exc.strerror or exc}", style="red", highlight=False, markup=False
        )
        return EXIT_IO
    except KeyboardInterrupt:
        logging.getLogger(__name__).warning("interrupted")
        return 130

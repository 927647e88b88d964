"""Errors a user can act on, and the documented exit codes of build.py.

Every failure a user can cause (bad flag, bad spec, no Docker engine, a failed
build) is raised as a KitError subclass; cli.main prints its message and exits
with its code. Anything else is a bug and keeps its traceback."""

from __future__ import annotations

# Exit codes of build.py (documented in README.md).
EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and its verdict is negative (cannot run, stale, over-committed…)
EXIT_USAGE = 2  # bad flag or argument value (argparse uses 2 as well)
EXIT_SPEC = 3  # images/ data is invalid
EXIT_DOCKER = 4  # no Docker engine, or a build/push failed
EXIT_IO = 5  # a file or folder the user named cannot be read or written (not a verdict)


class KitError(Exception):
    """An error with a message meant for the user, and an exit code."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(KitError):
    """A flag or argument has a value that is not accepted."""

    exit_code = EXIT_USAGE


class SpecError(KitError):
    """The image spec or matrix under images/ is invalid."""

    exit_code = EXIT_SPEC


class DockerError(KitError):
    """The Docker engine is unreachable, or a build, push or run failed."""

    exit_code = EXIT_DOCKER

"""Errors a user can act on, and the exit codes of the `tfgpu` command.

A ConfigError carries the four parts of the one-line message every bad value gets
(variable, value, what is accepted, an example), so the CLI, the hook and the build
side (`build.py plan`) all say the same thing.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
EXIT_OK = 0
EXIT_BROKEN = 1  # `check` found something broken
EXIT_USAGE = 2  # bad command line (argparse uses 2 too)
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: TF_GPU_REQUIRED=true and no usable GPU
EXIT_CONFIG = 78  # EX_CONFIG: bad configuration
SHOWN_CHARS = 200  # of a value in a message: a 4,300-digit or 8 MiB value is not echoed whole


def printable(text: str) -> str:
    """`text` with every character that is not printable written as repr() writes it (`\\n`,
    `\\x1b`, `\\u2028`): user text reaches logs and terminals as one line that cannot forge
    another (`\\ntfgpu: error: …`) or move the cursor. Printable text, the usual case, is
    returned as it is (one pass; no `re` at start-up)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: str) -> str:
    """A user's value as messages quote it: repr() (quoted, escaped), cut at SHOWN_CHARS."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}… ({len(value)} characters)"


class TfgpuError(Exception):
    """An error whose message is meant for the user; `exit_code` is what `tfgpu` exits with."""

    exit_code = EXIT_CONFIG


class ConfigError(TfgpuError, ValueError):
    """An environment variable has a value the kit does not accept, or contradicts another.

    `str()` is the one-line user message. It is also a ValueError, so code that guards
    `import tensorflow` against bad values in the usual way still catches it.
    """

    exit_code = EXIT_CONFIG

    def __init__(
        self, variable: str, value: str, accepted: str, example: str, *, why: str = ""
    ) -> None:
        self.variable = variable
        self.value = value
        self.accepted = accepted
        self.example = example
        self.why = why
        super().__init__(self.message)

    @property
    def message(self) -> str:
        why = f" ({printable(self.why)})" if self.why else ""
        variable = printable(self.variable)
        return (
            f"{variable}={shown(self.value)} is not valid{why}: accepted: "
            f"{printable(self.accepted)}; example: {variable}={printable(self.example)}"
        )

    def __str__(self) -> str:
        return self.message


class GpuUnavailableError(TfgpuError):
    """TF_GPU_REQUIRED=true, but no usable GPU is visible."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, reason: str, fix: str = "") -> None:
        self.reason = reason
        self.fix = fix  # "" : no GPU at all, the message's own advice
        super().__init__(
            f"TF_GPU_REQUIRED=true, but no usable GPU: {reason}. "
            + (
                fix
                or "Start the container with a GPU (docker run --gpus all …), or unset "
                "TF_GPU_REQUIRED to run on the CPU."
            )
        )


class HookMissingError(TfgpuError):
    """The command's Python would not load the hook (tfgpu.machine.interpreter): the settings would
    not apply, so `tfgpu run` starts nothing (exit 78) unless TF_GPU_REQUIRE_HOOK=false."""

    exit_code = EXIT_CONFIG

"""README's list of `build.py` commands and their flags, derived from build.py's own argparse
parser, so the two cannot drift (README once omitted `lock`), and README shows `./kit …`, which
sets up the kit's .venv, rather than `python build.py …`, which fails on the system Python."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from tfgpu.contract import settings
from tfgpu.contract.errors import ConfigError

from tfgpu_kit import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = cli.parser()
    for action in top._actions:  # argparse keeps its sub-commands in a private action
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("build.py has no sub-commands")


COMMANDS = list(_subparsers())


def _section(heading: str) -> str:
    start = README.index(f"\n## {heading}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def _table_rows(section: str) -> list[str]:
    """The first cell of each row of the section's first table, header and rule left out."""
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [line.split(" | ")[0].removeprefix("| ") for line in rows]


def test_the_parts_table_names_every_command_in_help_order() -> None:
    line = next(row for row in README.splitlines() if row.startswith("| `build.py` |"))
    named = re.findall(r"`([a-z0-9]+)`", line.split(":", 1)[1])
    assert named == COMMANDS


def test_the_build_py_table_has_one_row_per_command_in_help_order() -> None:
    cells = _table_rows(_section("`build.py`"))
    assert [cell.strip("`").split()[0] for cell in cells] == COMMANDS


def test_every_flag_the_table_shows_exists() -> None:
    parsers = _subparsers()
    for cell in _table_rows(_section("`build.py`")):
        command = cell.strip("`").split()[0]
        known = set(parsers[command]._option_string_actions)
        for flag in re.findall(r"--[a-z][a-z0-9-]*", cell):
            assert flag in known, f"README shows {command} {flag}, which build.py lacks"


def test_readme_runs_the_kit_through_kit_not_the_system_python() -> None:
    # the only mention is the sentence that says why not
    mentions = [line for line in README.splitlines() if "python build.py" in line]
    assert mentions == [
        "kit as `./kit …`, not `python build.py …`: `./kit` creates `.venv` with the kit's "
        "dependencies,"
    ]
    commands = re.findall(r"(?m)^\./kit ([a-z0-9]+)", README)
    assert set(commands) - {"test", "lint"} <= set(COMMANDS)


def test_help_keeps_the_exit_code_lines() -> None:
    text = _subparsers()["k8s"].format_help()
    assert "\n  2  usage: a bad flag or value\n" in text
    assert "\n  ./kit k8s --name text" in text  # the examples keep their lines too


def _contract_row(variable: str) -> str:
    return next(line for line in README.splitlines() if line.startswith(f"| `{variable}` |"))


def test_documented_ranges_are_what_the_runtime_accepts() -> None:
    port_row = _contract_row("TF_GPU_METRICS_PORT")
    assert "`1`–`65535`" in port_row and "`0` (or unset, or empty) = no metrics" in port_row
    assert settings.parse_metrics_port("0") is None  # off
    assert settings.parse_metrics_port("1") == 1 and settings.parse_metrics_port("65535") == 65535
    with pytest.raises(ConfigError):
        settings.parse_metrics_port("65536")
    # virtual devices take every amount TF_GPU_MEM_LIMIT does, percentages included
    split_row = _contract_row("TF_GPU_VIRTUAL_DEVICES")
    for example in ("6144", "6GiB", "40%"):
        assert f"`{example}`" in split_row
        assert settings.parse_virtual_devices(f"{example},{example}")

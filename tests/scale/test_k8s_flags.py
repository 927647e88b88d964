"""`build.py k8s` declares each flag once, as a field of tfgpu_kit.k8s.flags.Flags: argparse's
flags, the table's and the request dataclass's fields are the same names, in one order, and the
command module declares none of its own."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

from tfgpu_kit import cli
from tfgpu_kit.cli import k8s
from tfgpu_kit.k8s.flags import (
    DEFAULTS,
    DEPLOYMENT,
    EXAMPLES,
    JOB,
    OUTPUT,
    WORKERS,
    Flag,
    Flags,
    option,
    table,
)

COMMON = {"help", "verbose"}  # every sub-command's own: argparse's and cli/__init__.py's


def _k8s_parser() -> argparse.ArgumentParser:
    for action in cli.parser()._actions:  # argparse keeps its sub-commands in a private action
        if isinstance(action, argparse._SubParsersAction):
            parser: argparse.ArgumentParser = action.choices["k8s"]
            return parser
    raise AssertionError("build.py has no sub-commands")


def test_argparse_the_table_and_the_request_name_the_same_flags_in_one_order() -> None:
    actions = [a for a in _k8s_parser()._actions if a.dest not in COMMON]
    fields = [field.name for field in dataclasses.fields(Flags)]
    assert [a.dest for a in actions] == list(table()) == fields
    assert len(set(fields)) == len(fields)
    # each flag spelled once, from its field's name
    assert [a.option_strings for a in actions] == [[option(name)] for name in fields]


def test_every_field_is_a_declared_flag() -> None:
    for field in dataclasses.fields(Flags):
        flag = field.metadata.get("flag")
        assert isinstance(flag, Flag), field.name
        assert flag.shapes in (None, DEPLOYMENT, JOB, WORKERS, OUTPUT), field.name
        assert not (flag.switch and flag.unset is not None), field.name  # a switch is never None


def test_every_flag_a_refusal_quotes_has_an_example() -> None:
    """A flag that shapes one workload is named with an example when it is given to the other."""
    for name, flag in table().items():
        if flag.shapes in (DEPLOYMENT, JOB, WORKERS) and not flag.switch:
            assert name in EXAMPLES, name
    assert set(DEFAULTS) <= set(EXAMPLES)


def test_the_command_module_declares_no_flag() -> None:
    source = inspect.getsource(k8s)
    assert "add_argument(option(name), **flag.arguments)" in source
    assert source.count("add_argument(") == 1

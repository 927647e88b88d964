"""Reading the YAML files the kit is given (images/*.yaml, the lock, plan's compose files and
manifests), with one error that names the file and, for bad YAML, the line and column: never a
traceback. The caller picks the error class, and so the exit code (a spec: 3, a plan input: 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tfgpu_kit.errors import KitError, SpecError

# the C loader when PyYAML has it: several times faster than the pure-Python one
LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path | str, error: type[KitError] = SpecError) -> Any:
    """The one document of a YAML file."""
    text = _text(Path(path), error)
    try:
        return yaml.load(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        raise _invalid(Path(path), exc, error) from None


def load_documents(path: Path | str, error: type[KitError] = SpecError) -> list[Any]:
    """Every non-empty document of a (multi-document) YAML file."""
    text = _text(Path(path), error)
    try:
        return [doc for doc in yaml.load_all(text, Loader=LOADER) if doc is not None]
    except yaml.YAMLError as exc:
        raise _invalid(Path(path), exc, error) from None


def _text(path: Path, error: type[KitError]) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot be read (not UTF-8 text: {exc.reason})") from None


def _invalid(path: Path, exc: yaml.YAMLError, error: type[KitError]) -> KitError:
    mark = getattr(exc, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return error(f"{path}:{where} not valid YAML ({problem})")

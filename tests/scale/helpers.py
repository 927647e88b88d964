"""Run `build.py plan` in-process on YAML written to a temporary folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tfgpu_kit import cli


def write(folder: Path, name: str, *docs: Any) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return str(path)


def plan_json(
    capsys: pytest.CaptureFixture[str], files: list[str], *flags: str
) -> tuple[int, dict[str, Any]]:
    code = cli.main(["plan", *files, "--json", *flags])
    out = capsys.readouterr().out
    return code, json.loads(out)


def errors(report: dict[str, Any]) -> list[str]:
    return [
        f"{p['who']}: {p['what']} | {p['fix']}"
        for p in report["problems"]
        if p["severity"] == "error"
    ]

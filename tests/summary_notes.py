"""Lines a test module prints in the run's final summary, whichever process ran it (owner:
harness).

Under pytest-xdist a worker's own terminal is not the user's: what a fixture writes there is lost
(the arm64 module's cost, for one). A module adds its lines here; a
worker hands them to the controller in its `workeroutput` (tests/conftest.py), and the process
that writes the summary prints them, one section per title, in the order added."""

from __future__ import annotations

KEY = "tfgpu_summary_notes"  # in xdist's workeroutput

_notes: list[tuple[str, str]] = []


def add(section: str, line: str) -> None:
    _notes.append((section, line))


def taken() -> list[list[str]]:
    """This process's notes (JSON-friendly, for the worker's workeroutput), then none left."""
    out = [[section, line] for section, line in _notes]
    _notes.clear()
    return out


def merge(handed: list[list[str]]) -> None:
    """On the controller: a worker's notes."""
    _notes.extend((section, line) for section, line in handed)


def sections() -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for section, line in _notes:
        grouped.setdefault(section, []).append(line)
    return grouped

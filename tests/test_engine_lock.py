"""tests/engine_lock.py's `once`: work one run does once, on whichever xdist worker comes first."""

from __future__ import annotations

import uuid

import pytest

from tests import engine_lock


def test_once_per_run_and_not_when_the_work_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)
    name = f"test-{uuid.uuid4().hex}"
    with pytest.raises(RuntimeError), engine_lock.once(name) as done:
        assert done is False
        raise RuntimeError("the build failed")
    with engine_lock.once(name) as done:
        assert done is False  # a failed attempt does not count: the next caller tries again
    with engine_lock.once(name) as done:
        assert done is True
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)  # the next run
    with engine_lock.once(name) as done:
        assert done is False


def test_on_one_process_the_work_is_always_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    for _ in range(2):
        with engine_lock.once("test-one-process") as done:
            assert done is False

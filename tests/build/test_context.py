"""The pip command lines that fetch wheels for a base: its Python, CPython's ABI and a manylinux
platform the base's glibc runs (not the host's), offline from the cache first."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu_kit import context


def _value(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


class FakePip:
    """Stands in for `context._pip`: records each pip command line; offline may fail."""

    def __init__(self, *, offline_ok: bool) -> None:
        self.offline_ok = offline_ok
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], what: str) -> None:
        self.calls.append(args)
        if what == "offline" and not self.offline_ok:
            raise context.ContextError("offline failed (pip exit 1)")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "tfgpu-kit" / "wheels" / "py3.8"


@pytest.mark.parametrize("offline_ok", [True, False])
def test_every_download_targets_the_bases_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path, offline_ok: bool
) -> None:
    fake = FakePip(offline_ok=offline_ok)
    monkeypatch.setattr(context, "_pip", fake)
    context.download(["prometheus-client", "numpy"], "3.8", tmp_path / "dest")
    for args in fake.calls:
        assert args[0] == "download" and args[-2:] == ["prometheus-client", "numpy"]
        assert "--only-binary=:all:" in args
        assert _value(args, "--python-version") == ["3.8"]
        assert _value(args, "--implementation") == ["cp"]
        assert _value(args, "--abi") == ["cp38"]
        platforms = _value(args, "--platform")
        assert "manylinux2014_x86_64" in platforms
        # Ubuntu 20.04 bases (2.12/2.13) have glibc 2.31: no tag newer than manylinux2014
        assert all(p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64") for p in platforms)
    # offline from the cache first; PyPI only when that fails; then copied from the cache
    offline, *online, copy = fake.calls
    assert _value(offline, "--find-links") == [str(cache)] and "--no-index" in offline
    assert _value(offline, "--dest") == [str(cache)]
    if offline_ok:
        assert online == []
    else:
        (fetch,) = online
        assert "--no-index" not in fetch and _value(fetch, "--dest") == [str(cache)]
    assert "--no-index" in copy and _value(copy, "--find-links") == [str(cache)]
    assert _value(copy, "--dest") == [str(tmp_path / "dest")]


def test_abi_follows_the_bases_python(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    fake = FakePip(offline_ok=True)
    monkeypatch.setattr(context, "_pip", fake)
    context.download(["pip"], "3.11", cache / "dest")
    assert {a for args in fake.calls for a in _value(args, "--abi")} == {"cp311"}
    assert {a for args in fake.calls for a in _value(args, "--python-version")} == {"3.11"}


def test_nothing_to_download_runs_no_pip(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    fake = FakePip(offline_ok=True)
    monkeypatch.setattr(context, "_pip", fake)
    context.download([], "3.8", cache / "dest")
    assert fake.calls == []

"""The helper that provides promtool/prometheus: PATH first, else Debian's package unpacked
into the cache (the way a machine without the package installed gets them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ci_policy import ci_or_skip
from tests.monitoring import prometheus_tools


def test_a_tool_on_path_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "promtool"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert prometheus_tools.find("promtool") == fake
    assert not (tmp_path / "cache").exists()  # nothing downloaded


def test_debians_package_is_unpacked_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apt-get download + dpkg -x, without root: both binaries run from the cache."""
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        ci_or_skip("apt-get and dpkg are needed to unpack Debian's prometheus package")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    target = prometheus_tools.cache_dir()
    assert target == tmp_path / "cache" / "tfgpu-kit" / "prometheus"
    prometheus_tools._unpack_package(target)
    for tool in ("promtool", "prometheus"):
        binary = target / "usr" / "bin" / tool
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "version" in done.stdout + done.stderr
    assert not [p for p in target.parent.iterdir() if p != target]  # no work dir left behind


def test_a_missing_package_tool_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no promtool, no apt-get
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(prometheus_tools.ToolMissing, match="apt-get is missing"):
        prometheus_tools.find("promtool")

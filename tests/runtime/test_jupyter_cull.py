"""tfgpu.jupyter_cull: TFGPU_JUPYTER_CULL_* become Jupyter's MappingKernelManager settings;
a bad value stops Jupyter with the kit's one-line message; the config file the images install
does that when Jupyter's loader runs it. (The container test, tests/containers/test_jupyter.py,
sees a real kernel culled.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tfgpu.act import jupyter_cull, jupyter_root
from tfgpu.act.jupyter_cull import (
    CONNECTED,
    IDLE_TIMEOUT,
    INTERVAL,
    CullSettings,
    configure,
    read_settings,
)
from tfgpu.contract.errors import EXIT_CONFIG, ConfigError

from tests.runtime.conftest import SRC, clean_env, find_python


def kernel_manager_config() -> SimpleNamespace:
    """What configure() touches of a traitlets Config: its MappingKernelManager section."""
    return SimpleNamespace(MappingKernelManager=SimpleNamespace())


def test_defaults_cull_after_an_hour_also_with_an_open_tab() -> None:
    settings = read_settings({})
    assert settings == CullSettings(3600, 300, True)
    assert settings.enabled
    assert "idle for 3600 s" in settings.describe() and "also with" in settings.describe()


def test_empty_values_mean_the_default() -> None:
    # compose's `VAR=` passes an empty string; the kit's other variables treat it as unset
    env = {IDLE_TIMEOUT: "", INTERVAL: " ", CONNECTED: ""}
    assert read_settings(env) == CullSettings(3600, 300, True)


def test_values_are_read() -> None:
    env = {IDLE_TIMEOUT: " 600 ", INTERVAL: "30", CONNECTED: "No"}
    assert read_settings(env) == CullSettings(600, 30, False)
    assert "but not with a browser tab" in read_settings(env).describe()


def test_zero_turns_culling_off() -> None:
    settings = read_settings({IDLE_TIMEOUT: "0"})
    assert settings.idle_timeout == 0 and not settings.enabled
    assert settings.describe() == f"idle kernels are not culled ({IDLE_TIMEOUT}=0)"


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        (IDLE_TIMEOUT, "1h", "seconds without a unit, e.g. 1h = 3600"),
        (IDLE_TIMEOUT, "-5", ""),
        (IDLE_TIMEOUT, "3.5", ""),
        (IDLE_TIMEOUT, "٣٠", ""),  # Arabic-Indic digits: int() takes them, Jupyter's users not
        (IDLE_TIMEOUT, "604801", "longer than a week"),
        (INTERVAL, "0", "at least 1 s"),  # Jupyter would warn and silently use 300
        (INTERVAL, "five", ""),
        (CONNECTED, "maybe", ""),
    ],
)
def test_bad_values_name_variable_value_accepted_and_example(
    variable: str, value: str, why: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        read_settings({variable: value})
    error = caught.value
    assert (error.variable, error.value) == (variable, value)
    message = str(error)
    assert message.startswith(f"{variable}={value!r} is not valid")
    assert "accepted: " in message and f"example: {variable}=" in message
    if why:
        assert f"({why})" in message
    # the example itself must be accepted
    example = message.split(f"example: {variable}=")[1].split()[0]
    read_settings({variable: example})


def test_configure_sets_the_kernel_manager() -> None:
    config = kernel_manager_config()
    env = {IDLE_TIMEOUT: "120", INTERVAL: "10", CONNECTED: "false"}
    assert configure(config, env) == CullSettings(120, 10, False)
    manager = config.MappingKernelManager
    assert (manager.cull_idle_timeout, manager.cull_interval, manager.cull_connected) == (
        120,
        10,
        False,
    )


def test_configure_off_sets_timeout_zero() -> None:
    config = kernel_manager_config()
    configure(config, {IDLE_TIMEOUT: "0"})
    assert config.MappingKernelManager.cull_idle_timeout == 0


def test_bad_value_exits_78_with_one_message_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = kernel_manager_config()
    with pytest.raises(SystemExit) as caught:
        configure(config, {INTERVAL: "-1"})
    assert caught.value.code == EXIT_CONFIG == 78
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"tfgpu: error: {INTERVAL}='-1' is not valid: accepted: whole seconds from 1 to 604800 "
        f"(a week); example: {INTERVAL}=300",
        "tfgpu: Jupyter was not started (see the kit's docs/jupyter.md)",
    ]
    assert vars(config.MappingKernelManager) == {}  # nothing half-applied


def test_tf_gpu_config_off_leaves_jupyter_alone() -> None:
    config = kernel_manager_config()
    # not even validated: TF_GPU_CONFIG=off means the kit does nothing at all
    assert configure(config, {"TF_GPU_CONFIG": "off", IDLE_TIMEOUT: "bad"}) is None
    assert vars(config.MappingKernelManager) == {}


def test_install_writes_the_config_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "etc" / "jupyter"
    assert jupyter_cull.main(["install", str(folder)]) == 0
    written = folder / "jupyter_server_config.py"
    assert capsys.readouterr().out.strip() == str(written)
    assert written.read_text(encoding="utf-8") == jupyter_cull.CONFIG_TEXT
    # a second install (or a base that has the file) is refused, and the file is kept
    written.write_text("c.ServerApp.port = 9999\n", encoding="utf-8")
    assert jupyter_cull.main(["install", str(folder)]) == 1
    assert "exists already" in capsys.readouterr().err
    assert written.read_text(encoding="utf-8") == "c.ServerApp.port = 9999\n"


@pytest.mark.parametrize("argv", [[], ["install"], ["setup", "/etc/jupyter"]])
def test_install_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert jupyter_cull.main(argv) == 2
    assert capsys.readouterr().err.startswith("usage: python3 -m tfgpu.jupyter_cull install DIR")


# Runs the installed file as traitlets' PyFileConfigLoader does: exec with get_config (and c)
# in its namespace. Jupyter's Config creates a section on first attribute access.
LOADER = """
import json, sys
class Section(dict):
    def __getattr__(self, name):
        return self.setdefault(name, Section())
    def __setattr__(self, name, value):
        self[name] = value
config = Section()
path = sys.argv[1]
code = compile(open(path).read(), path, "exec")
exec(code, {"c": config, "get_config": lambda: config, "__file__": path})
print(json.dumps(config))
"""


def _load_as_jupyter(python: str, folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    config_file = folder / "jupyter_server_config.py"
    if not config_file.exists():
        jupyter_cull.install(str(folder))
    return subprocess.run(
        [python, "-c", LOADER, str(config_file)],
        env=clean_env(PYTHONPATH=str(SRC), **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("version", ["3.8", "current"])
def test_installed_file_configures_jupyter(tmp_path: Path, version: str) -> None:
    python = sys.executable if version == "current" else find_python(version)
    proc = _load_as_jupyter(python, tmp_path, **{IDLE_TIMEOUT: "5", INTERVAL: "1"})
    assert proc.returncode == 0, proc.stderr
    # root may run Jupyter (tfgpu.jupyter_root); this test runs as whoever runs the suite
    as_root = ', "ServerApp": {"allow_root": true}' if os.geteuid() == 0 else ""
    assert proc.stdout.strip() == (
        '{"MappingKernelManager": {"cull_idle_timeout": 5, "cull_interval": 1, '
        f'"cull_connected": true}}{as_root}}}'
    )


class _Config(dict):  # type: ignore[type-arg]
    """traitlets' Config as far as configure() uses it: a section per attribute."""

    def __getattr__(self, name: str) -> Any:
        return self.setdefault(name, _Config())

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


@pytest.mark.parametrize(
    ("euid", "environ", "allowed"),
    [(0, {}, True), (1000, {}, False), (12345, {}, False), (0, {"TF_GPU_CONFIG": "off"}, False)],
)
def test_root_may_run_jupyter_and_nobody_else_is_changed(
    euid: int, environ: dict[str, str], allowed: bool
) -> None:
    config = _Config()
    assert jupyter_root.configure(config, environ, euid=euid) is allowed
    assert config == ({"ServerApp": {"allow_root": True}} if allowed else {})


def test_installed_file_stops_jupyter_on_a_bad_value(tmp_path: Path) -> None:
    proc = _load_as_jupyter(sys.executable, tmp_path, **{IDLE_TIMEOUT: "30m"})
    assert proc.returncode == 78
    assert proc.stdout == ""
    assert f"tfgpu: error: {IDLE_TIMEOUT}='30m' is not valid" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_module_stays_standard_library_only() -> None:
    # the runtime package has no dependencies; the config file runs in Jupyter's own Python
    code = (
        "import json, sys; before = set(sys.modules); import tfgpu.jupyter_cull; "
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={**clean_env(PYTHONPATH=str(SRC)), "PYTHONNOUSERSITE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.path.dirname(SRC),
    )
    assert proc.returncode == 0, proc.stderr
    imported = set(json.loads(proc.stdout))
    assert "tfgpu" in imported
    assert imported - set(sys.stdlib_module_names) == {"tfgpu"}

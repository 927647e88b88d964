"""The metrics endpoint's server (tfgpu.metrics_server, started by tfgpu.metrics): the address
it binds (TF_GPU_METRICS_ADDR, validated at the door), only /metrics answered, and bounded
connections: a per-connection timeout and a cap, so idle or slow clients cannot pile up threads
in the user's process (issue 22, finding 11)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from tfgpu import metrics, metrics_server, settings
from tfgpu.errors import ConfigError

from tests.runtime.test_metrics import free_port
from tests.runtime.test_run import run as tfgpu


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """tfgpu.metrics serving on 127.0.0.1 at a free port, with a 1 s request timeout."""
    monkeypatch.setattr(metrics_server._QuietHandler, "timeout", 1.0)
    saved = dict(metrics._state)
    metrics._state.update(attempted=False, server=None, port=None)
    port = free_port()
    env = {"TF_GPU_METRICS_PORT": str(port), "TF_GPU_METRICS_ADDR": "127.0.0.1"}
    assert metrics.start_from_environment(None, env) is True
    yield port
    server = metrics._state["server"]
    server.shutdown()
    server.server_close()
    metrics._state.clear()
    metrics._state.update(saved)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_binds_the_address_asked_for(served: int) -> None:
    assert metrics._state["server"].server_address[0] == "127.0.0.1"
    status, body = get(served, "/metrics")
    assert status == 200 and "tfgpu_tensorflow_initialized" in body


@pytest.mark.parametrize("path", ["/", "/favicon.ico", "/metrics/x", "/../etc/passwd"])
def test_only_metrics_is_served(served: int, path: str) -> None:
    status, body = get(served, path)
    assert status == 404 and "tfgpu_" not in body


def test_idle_connections_are_capped_and_time_out(served: int) -> None:
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", served)) for _ in range(60)]
    try:
        time.sleep(0.3)
        # 60 clients that send nothing hold at most MAX_CONNECTIONS threads, not 60
        assert threading.active_count() - before <= metrics_server.MAX_CONNECTIONS
        # the ones over the cap were closed at once: reading gives end of file
        closed = 0
        for conn in idle:
            conn.settimeout(0.05)
            with contextlib.suppress(TimeoutError, OSError):
                closed += conn.recv(1) == b""
        assert closed >= len(idle) - metrics_server.MAX_CONNECTIONS
        # after the timeout (1 s here, 10 s shipped) the idle ones are gone, scrapes work
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= before
        assert get(served, "/metrics")[0] == 200
    finally:
        for conn in idle:
            conn.close()


def test_a_timed_out_client_leaves_no_traceback(
    served: int, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.create_connection(("127.0.0.1", served)) as conn:
        conn.sendall(b"GET /metr")  # never finishes its request line
        time.sleep(1.5)
    assert get(served, "/metrics")[0] == 200
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("value", ["127.0.0.1", " 0.0.0.0 ", "::", "::1", "10.1.2.3"])
def test_addresses_accepted(value: str) -> None:
    assert settings.parse_environment({"TF_GPU_METRICS_ADDR": value}).metrics_addr == str(
        value.strip()
    )


@pytest.mark.parametrize(
    "value", ["localhost", "0.0.0.0:9401", "127.0.0.1\nx", "١٢٧.0.0.1", "256.0.0.1", "*", ""]
)
def test_addresses_refused_at_the_door(value: str) -> None:
    if value == "":
        assert settings.parse_environment({"TF_GPU_METRICS_ADDR": ""}).metrics_addr == "0.0.0.0"
        return
    with pytest.raises(ConfigError) as refused:
        settings.parse_environment({"TF_GPU_METRICS_ADDR": value})
    assert "TF_GPU_METRICS_ADDR" in str(refused.value) and "127.0.0.1" in str(refused.value)


def test_tfgpu_run_refuses_a_bad_address_and_starts_nothing() -> None:
    r = tfgpu("run", "--", "sh", "-c", "echo started", TF_GPU_METRICS_ADDR="localhost")
    assert r.returncode == 78 and "started" not in r.stdout
    assert "TF_GPU_METRICS_ADDR='localhost' is not valid" in r.stderr

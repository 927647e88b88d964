"""A real Prometheus server for a test: on 127.0.0.1 at a free port, a temporary configuration
and storage, a short scrape and evaluation interval, and the kit's rules with their `for:`
durations shortened (a copy generated from the shipped file, so the test runs what ships)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

INTERVAL = "1s"


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick, released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rules_with_short_for(source: Path, target: Path, duration: str) -> None:
    """The rules of `source` with every `for:` set to `duration`; nothing else changes."""
    doc = yaml.safe_load(source.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = duration
    target.write_text(yaml.safe_dump(doc, sort_keys=False))


class PrometheusServer:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=5) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts (GET /api/v1/alerts)."""
        found: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return found

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def running(
    binary: Path, workdir: Path, scrape_configs: list[dict[str, Any]], rule_files: list[Path]
) -> Iterator[PrometheusServer]:
    port = free_port()
    config = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": scrape_configs,
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_ready(server: PrometheusServer, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            code = server.process.returncode
            raise AssertionError(f"prometheus exited {code}:\n{server.log_tail()}")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.5)
    raise AssertionError(f"prometheus not ready within {timeout:.0f}s:\n{server.log_tail()}")

"""`tfgpu server` is an unauthenticated gRPC endpoint on every interface (TensorFlow binds 0.0.0.0):
it starts only in a Kubernetes pod or with TF_GPU_SERVER_OPEN=true, and says where it really
listens, read from the kernel. With real TensorFlow (tensorflow-cpu of .venv) and a real gRPC
client (grpcio, TensorFlow's own dependency) on this host's non-loopback address. The same in
containers of the kit's image: tests/multiworker/test_parameter_servers.py."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from tfgpu.commands import server
from tfgpu.contract.errors import ConfigError

from tests.runtime.conftest import SRC, clean_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def outward_address() -> str:
    """An address of this host that is not loopback (the route a peer would use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
        address = str(s.getsockname()[0])
    assert not address.startswith("127."), address
    return address


def ps_env(port: int, **extra: str) -> dict[str, str]:
    """A parameter server's environment, its own TF_CONFIG naming this host's loopback."""
    cluster = {
        "chief": [f"localhost:{port + 1}"],
        "worker": [f"localhost:{port + 2}"],
        "ps": [f"localhost:{port}"],
    }
    env = clean_env(
        TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0}}),
        PYTHONPATH=str(SRC),
        **extra,
    )
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


def reachable(address: str, seconds: float) -> bool:
    """A real gRPC client's channel to `address` becomes ready within `seconds`."""
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=seconds)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


def test_outside_kubernetes_it_refuses_and_nothing_listens() -> None:
    port = free_port()
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "server"],
        env=ps_env(port),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 78, done.stderr
    text = " ".join(done.stderr.split())
    assert "TF_GPU_SERVER_OPEN=''" in text and "not a Kubernetes pod" in text
    assert "listens on every interface" in text and "no authentication" in text
    assert "example: TF_GPU_SERVER_OPEN=true" in text and "Traceback" not in done.stderr
    assert not reachable(f"{outward_address()}:{port}", 2)


@pytest.mark.parametrize(
    "opt_in", [{"TF_GPU_SERVER_OPEN": "true"}, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}]
)
def test_opened_it_says_the_real_bind_address_which_a_peer_reaches(
    opt_in: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tfgpu", "server"],
            env={**ps_env(port), **opt_in},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while "listening on" not in log.read_text() and time.monotonic() < deadline:
            assert child.poll() is None, log.read_text()
            time.sleep(0.5)
        text = " ".join(log.read_text().split())
        # the truth, read from the kernel: every interface, whatever host TF_CONFIG names
        wildcard = (
            rf"listening on (0\.0\.0\.0|\[::\]):{port}, reached by its peers as localhost:{port}"
        )
        assert re.search(wildcard, text), text
        assert "no authentication" in text
        # and so it is: a gRPC client reaches it on the host's outward address, not only on
        # the loopback the cluster spec names
        assert reachable(f"{outward_address()}:{port}", 30)
    finally:
        child.kill()
        child.wait()


def test_open_is_validated_like_every_boolean() -> None:
    with pytest.raises(ConfigError, match="TF_GPU_SERVER_OPEN='maybe'"):
        server.refuse_outside_kubernetes({"TF_GPU_SERVER_OPEN": "maybe"}, 2222)
    server.refuse_outside_kubernetes({"TF_GPU_SERVER_OPEN": "yes"}, 2222)
    server.refuse_outside_kubernetes({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, 2222)
    with pytest.raises(ConfigError, match="port 2222 does not open here"):
        server.refuse_outside_kubernetes({"TF_GPU_SERVER_OPEN": "false"}, 2222)


def test_listeners_reads_the_kernels_tables(tmp_path: Path) -> None:
    tcp = tmp_path / "tcp"
    tcp.write_text(
        "  sl  local_address rem_address   st\n"
        "   0: 00000000:08AE 00000000:0000 0A 0\n"  # 0.0.0.0:2222 LISTEN
        "   1: 0100007F:08AE 0100007F:9C40 01 0\n"  # 127.0.0.1:2222 ESTABLISHED: not a listener
        "   2: 0100007F:08AF 00000000:0000 0A 0\n"  # 127.0.0.1:2223 LISTEN, another port
    )
    tcp6 = tmp_path / "tcp6"
    tcp6.write_text(
        "  sl  local_address rem_address st\n"
        "   0: 00000000000000000000000000000000:08AE 00000000000000000000000000000000:0000 0A 0\n"
    )
    assert server.listeners(2222, (str(tcp), str(tcp6), "/nonexistent")) == [
        "0.0.0.0:2222",
        "[::]:2222",
    ]
    assert server.listeners(2223, (str(tcp),)) == ["127.0.0.1:2223"]

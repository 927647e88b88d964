"""The metrics endpoint's server (tfgpu.act.metrics_server, started by tfgpu.act.metrics): the
address it binds (TF_GPU_METRICS_ADDR, validated at the door), only /metrics answered, and bounded
connections: a per-connection timeout and a cap, so idle or slow clients cannot pile up threads
in the user's process."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from tfgpu.act import metrics, metrics_server
from tfgpu.contract import settings
from tfgpu.contract.errors import ConfigError

from tests.runtime.test_metrics import free_port, fresh_state  # noqa: F401 (a fixture)
from tests.runtime.test_run import run as tfgpu


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """tfgpu.act.metrics serving on 127.0.0.1 at a free port, with a 1 s request timeout."""
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
        time.sleep(len(idle) / metrics_server.REQUESTS_PER_S + 0.5)  # all taken (paced)
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


# --- slow clients, the probe under a full house, name lookups, scrape floods --------------------


def _closed_by_server(conn: socket.socket) -> bool:
    """Whether the server has ended this connection (end of file or a reset), without waiting."""
    conn.settimeout(0.01)
    try:
        return conn.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_a_slow_client_gets_the_connection_lifetime_not_one_per_byte(served: int) -> None:
    """StreamRequestHandler.timeout bounds each read: a client sending one byte more often than
    that kept its connection (and one of the 8 slots) for ever. Each connection now lives at
    most the timeout (1 s here, 10 s shipped) from its accept, whatever it sends."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", served)) as conn:
        closed_after = None
        for _ in range(40):  # a byte every 0.2 s for at most 8 s: never 1 s without one
            with contextlib.suppress(OSError):
                conn.sendall(b"G")
            if _closed_by_server(conn):
                closed_after = time.monotonic() - started
                break
            time.sleep(0.2)
    assert closed_after is not None, "the slow client kept its connection for 8 s"
    assert 0.9 <= closed_after <= 5.0, closed_after  # the lifetime plus the 0.5 s reaping turn


def test_livez_answers_under_a_full_house_of_slow_clients(
    served: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight clients that each send a byte every 0.3 s held all 8 slots; a kubelet-like probe
    (a 1 s timeout) got no answer, three failures in a row restart the pod. The probe now
    replaces the oldest slow client; the clients reconnect as an attacker would."""
    monkeypatch.setattr(metrics_server._QuietHandler, "timeout", 60.0)  # no help from lifetimes
    slow: list[socket.socket] = []
    stop = threading.Event()

    def hold_the_house() -> None:
        for _ in range(200):  # 60 s at most
            if stop.is_set():
                return
            for i in range(metrics_server.MAX_CONNECTIONS):
                if i == len(slow):
                    slow.append(socket.create_connection(("127.0.0.1", served)))
                try:
                    slow[i].sendall(b"G")
                except OSError:  # replaced by the server: come back, as a flood would
                    slow[i].close()
                    slow[i] = socket.create_connection(("127.0.0.1", served))
            time.sleep(0.3)

    attacker = threading.Thread(target=hold_the_house, daemon=True)
    attacker.start()
    try:
        time.sleep(1.0)  # the house is full
        answers = []
        for _ in range(5):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{served}/livez", timeout=1) as r:
                    answers.append(r.status)
            except OSError as e:
                answers.append(repr(e))
            time.sleep(0.5)
        assert answers == [200] * 5, answers
    finally:
        stop.set()
        attacker.join(5)
        for conn in slow:
            conn.close()


@pytest.mark.usefixtures("fresh_state")
def test_binding_looks_up_no_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """http.server's server_bind called socket.getfqdn(address): with a silent DNS server,
    `import tensorflow` waited for it (21.9 s instead of 11.4 s, TF_GPU_METRICS_ADDR=127.0.0.2)."""
    asked: list[str] = []

    def getfqdn(name: str = "") -> str:
        asked.append(name)
        raise AssertionError("a name lookup in the importing thread")

    monkeypatch.setattr(socket, "getfqdn", getfqdn)
    port = free_port()
    env = {"TF_GPU_METRICS_PORT": str(port), "TF_GPU_METRICS_ADDR": "127.0.0.1"}
    assert metrics.start_from_environment(None, env) is True
    assert asked == []
    assert get(port, "/metrics")[0] == 200 and asked == []


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_scrape_flood_collects_at_most_the_limit_per_second() -> None:
    """The collector runs in the training process: 8 clients scraping back to back cut a
    training loop's steps/s by 45 %. Collections are now limited per rolling second; scrapes
    beyond share the latest answer to the same request (figures: bench_scrape_flood.py)."""
    calls: list[int] = []

    def app(environ: dict[str, str], start_response: Any) -> list[bytes]:
        calls.append(1)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [f"collection {len(calls)}\n".encode()]

    clock = _Clock()
    limited = metrics_server.Collections(app, per_s=4, clock=clock)
    plain = {"REQUEST_METHOD": "GET", "HTTP_ACCEPT": "text/plain"}

    def scrape(environ: dict[str, str]) -> tuple[str, bytes]:
        status: list[str] = []
        body = b"".join(limited(environ, lambda s, h: status.append(s)))
        return status[0], body

    bodies = [scrape(plain) for _ in range(4)]  # one scraper, or a few: every scrape is fresh
    assert [b for _, b in bodies] == [f"collection {i}\n".encode() for i in range(1, 5)]
    flood = [scrape(plain) for _ in range(100)]  # the same second: nothing collected
    assert len(calls) == 4 and set(flood) == {("200 OK", b"collection 4\n")}
    status, _ = scrape({**plain, "QUERY_STRING": "name[]=x"})  # no answer kept for it
    assert status.startswith("429") and len(calls) == 4
    clock.now += 1.01  # a second later: fresh again
    assert scrape(plain) == ("200 OK", b"collection 5\n")


def test_a_hung_collection_holds_only_its_own_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Collections run one at a time; the scrapes queued behind one that hangs (a TensorFlow or
    NVML call) answer 503 in time, so their threads end and free their slots."""
    monkeypatch.setattr(metrics_server, "REQUEST_TIMEOUT_S", 0.5)
    release = threading.Event()

    def app(environ: dict[str, str], start_response: Any) -> list[bytes]:
        release.wait(30)
        start_response("200 OK", [])
        return [b"late\n"]

    limited = metrics_server.Collections(app)
    first = threading.Thread(target=lambda: limited({}, lambda s, h: None), daemon=True)
    first.start()
    try:
        time.sleep(0.2)  # the first scrape holds the collection
        status: list[str] = []
        started = time.monotonic()
        body = b"".join(limited({}, lambda s, h: status.append(s)))
        assert status == ["503 Service Unavailable"] and b"more than" in body
        assert time.monotonic() - started < 10
    finally:
        release.set()
        first.join(10)


def test_a_flood_of_fast_clients_is_paced(served: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cached answers still cost the training process their HTTP handling: 8 clients got
    hundreds a second. Connections are now taken at a bounded rate; the rest wait in the listen
    queue. A lower bound on the time only, which no host's speed can break."""
    monkeypatch.setattr(metrics_server, "REQUESTS_PER_S", 20.0)
    monkeypatch.setattr(metrics_server, "REQUEST_BURST", 5)
    time.sleep(0.5)  # the burst allowance builds up again
    started = time.monotonic()
    statuses = [get(served, "/livez")[0] for _ in range(45)]
    took = time.monotonic() - started
    assert statuses == [200] * 45
    assert took >= (45 - 5 - 1) / 20.0, took  # 1.95 s for 45 answers at 20 a second


def test_a_flood_of_idle_clients_keeps_livez_answering() -> None:
    """128 clients that connect, send nothing and reconnect as soon as they are cut: every
    liveness probe still gets its answer within the timeout the kit renders for the kubelet's
    probe (LIVEZ_PROBES: 5 s), and the median within Kubernetes' default probe timeout (1 s), so
    a healthy pod is not restarted. Idle connections used to be paced like answers (50 a
    second) and held the probe behind them for 2.4 s, whatever the host's speed."""
    from tfgpu_kit.k8s.render import LIVEZ_PROBES

    server = metrics_server.serve(
        lambda environ, start: [b""], "127.0.0.1", 0, livez=lambda: (True, "ok\n")
    )
    port = int(server.server_address[1])
    stop = threading.Event()

    def idle_client() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError), socket.socket() as s:
                s.settimeout(30)
                s.connect(("127.0.0.1", port))
                s.recv(1)  # returns when the server cuts it (evicted, or its 10 s are up)

    clients = [threading.Thread(target=idle_client, daemon=True) for _ in range(128)]
    try:
        for client in clients:
            client.start()
        time.sleep(2)  # the flood is on
        took = []
        for _ in range(5):
            started = time.monotonic()
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/livez", timeout=LIVEZ_PROBES["livez_timeout_s"]
            ) as answer:
                assert answer.status == 200
            took.append(time.monotonic() - started)
        assert max(took) < LIVEZ_PROBES["livez_timeout_s"], took
        assert sorted(took)[2] < 1.0, took
        print(f"/livez under 128 idle clients: {', '.join(f'{t:.2f}' for t in took)} s")
    finally:
        stop.set()
        server.shutdown()
        server.server_close()

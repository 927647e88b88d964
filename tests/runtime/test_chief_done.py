"""Servers that do not outlive the chief (tfgpu.commands.chief_done): the chief's `tfgpu run`, its
program done, answers its servers with a banner on its own port; a server that reads it ends, and
one whose chief stays unreachable ends after GONE_S. Real sockets on loopback; the clock is a
stand-in where the test would otherwise wait ten minutes. The same in containers of the kit's image,
with real TensorFlow servers: tests/multiworker/test_parameter_servers.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from tfgpu.commands import chief_done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_reads_the_banner_the_chief_announces() -> None:
    port = free_port()
    told: list[int] = []
    chief = threading.Thread(target=lambda: told.append(chief_done.announce(port, 1, 10)))
    chief.start()
    answer = "down"
    for _ in range(100):  # until the chief listens
        answer = chief_done.ask("127.0.0.1", port)
        if answer != "down":
            break
        threading.Event().wait(0.05)
    chief.join(15)
    assert answer == "done" and told == [1]


def test_the_chief_stops_announcing_when_every_server_was_told() -> None:
    port = free_port()
    told: list[int] = []
    chief = threading.Thread(target=lambda: told.append(chief_done.announce(port, 1, 30)))
    chief.start()
    while chief_done.ask("127.0.0.1", port) != "done":
        threading.Event().wait(0.05)
    chief.join(5)
    assert not chief.is_alive() and told == [1]  # not the 30 s


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """Something that listens and says nothing, as a gRPC server waits for its client."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield int(server.getsockname()[1])


def test_a_running_chief_is_up_and_a_closed_port_is_down(silent_listener: int) -> None:
    assert chief_done.ask("127.0.0.1", silent_listener) == "up"
    assert chief_done.ask("127.0.0.1", free_port()) == "down"
    assert chief_done.ask("no-such-host.invalid", 2222) == "down"


class Script:
    """ask() answers from a list; the clock advances by POLL_S per sleep."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.now = 0.0

    def ask(self, host: str, port: int) -> str:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def follow(answers: list[str]) -> tuple[str, float]:
    script = Script(answers)
    why = chief_done.follow(
        "chief", 2222, ask=script.ask, clock=lambda: script.now, sleep=script.sleep
    )
    return why, script.now


def test_a_chief_not_up_yet_is_waited_for() -> None:
    """Pods start in any order: a chief never seen is not 'gone'."""
    why, _ = follow(["down"] * 400 + ["up", "done"])
    assert why == "the chief has completed"


def test_a_chief_replaced_within_the_bound_is_waited_for() -> None:
    gap = int(chief_done.GONE_S / chief_done.POLL_S) - 2
    why, _ = follow(["up", *["down"] * gap, "up", "done"])
    assert why == "the chief has completed"


def test_a_chief_gone_for_good_ends_the_server_after_the_bound() -> None:
    why, took = follow(["up", "down"])
    assert "unreachable for 600s" in why
    assert chief_done.GONE_S <= took <= chief_done.GONE_S + 2 * chief_done.POLL_S

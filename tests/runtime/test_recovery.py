"""The recovery rule (TF_GPU_RECOVER_*): validated at the door, shown by `tfgpu show`, and
applied by tfgpu.act.recovery's watch on readings (a fake clock and fake readings here; real
TensorFlow on the fake GPU, restarted by Docker: tests/gpu/test_recovery.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tfgpu.act import metrics, recovery
from tfgpu.contract import settings
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.recovery_rule import EXIT_STUCK, RecoveryRule

from tests.runtime.test_metrics import free_port
from tests.runtime.test_run import run as tfgpu

MIB = 1 << 20
CAPPED = {"TF_GPU_MEM_LIMIT": "1024"}


def rule_of(**env: str) -> RecoveryRule | None:
    return settings.parse_environment(env).recovery


def test_off_unless_asked() -> None:
    assert rule_of() is None and rule_of(**CAPPED) is None


def test_a_full_rule_and_its_defaults() -> None:
    rule = rule_of(**CAPPED, TF_GPU_RECOVER_AT="95%", TF_GPU_RECOVER_ACTION="exit")
    assert rule is not None
    assert (rule.share, rule.after_s, rule.action) == (0.95, 300.0, "exit")
    rule = rule_of(
        **CAPPED,
        TF_GPU_RECOVER_AT=" 90.5 % ",
        TF_GPU_RECOVER_AFTER="2m",
        TF_GPU_RECOVER_ACTION="EXIT",
    )
    assert rule is not None and (rule.share, rule.after_s, rule.action) == (0.905, 120.0, "exit")
    with_port = rule_of(**CAPPED, TF_GPU_RECOVER_AT="95%", TF_GPU_METRICS_PORT="9401")
    assert with_port is not None and with_port.action == "report"  # the default


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95", "TF_GPU_RECOVER_ACTION": "exit"}, "AT"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "0%", "TF_GPU_RECOVER_ACTION": "exit"}, "AT"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "101%", "TF_GPU_RECOVER_ACTION": "exit"}, "AT"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "٩٥%", "TF_GPU_RECOVER_ACTION": "exit"}, "AT"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%\n", "TF_GPU_RECOVER_ACTION": "reboot"}, "ACTION"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_AFTER": "0"}, "AFTER"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_AFTER": "5 min"}, "AFTER"),
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_AFTER": "8d"}, "AFTER"),
        ({**CAPPED, "TF_GPU_RECOVER_AFTER": "5m"}, "AFTER"),  # no rule to time
        ({"TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_ACTION": "exit"}, "AT"),  # no cap
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%"}, "AT"),  # report, but no metrics port
        ({**CAPPED, "TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_ACTION": "report"}, "ACTION"),
    ],
)
def test_bad_rules_are_refused_naming_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings.parse_environment(env)
    assert refused.value.variable == f"TF_GPU_RECOVER_{variable}"
    assert "example: TF_GPU_RECOVER_" in str(refused.value)


def test_tfgpu_run_refuses_a_bad_rule_with_78_and_starts_nothing() -> None:
    r = tfgpu("run", "--", "sh", "-c", "echo started", **CAPPED, TF_GPU_RECOVER_AT="95")
    assert r.returncode == 78 and "started" not in r.stdout
    assert "TF_GPU_RECOVER_AT='95' is not valid" in r.stderr


def test_tfgpu_show_says_what_the_rule_does() -> None:
    r = tfgpu("show", **CAPPED, TF_GPU_RECOVER_AT="95%", TF_GPU_RECOVER_ACTION="exit")
    assert r.returncode == 0, r.stderr
    assert "TF_GPU_RECOVER_AFTER       '5m'         kit default" in r.stdout
    assert "recovery: a capped GPU at >= 95% of its cap at every sample for 5m is stuck; " in (
        r.stdout
    )
    assert f"then exit {EXIT_STUCK}" in r.stdout


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def watch_of(readings: list[float], after_s: float = 10) -> tuple[recovery.Watch, Clock, list]:
    """A watch over one 1024 MiB logical GPU whose in-use MiB the test sets."""
    clock = Clock()
    current = [readings[0]]

    def read() -> list[tuple[str, float, float]]:
        return [("/device:GPU:0", current[0] * MIB, 1024.0 * MIB)]

    return recovery.Watch(RecoveryRule(0.9, after_s, "exit"), read, clock), clock, current


def test_stuck_only_after_the_whole_period_at_the_share() -> None:
    watch, clock, current = watch_of([1000])
    for _ in range(10):  # 0 .. 9 s at 1000 of 1024 MiB (98 %)
        assert watch.sample() is None
        clock.now += 1
    reason = watch.sample()  # 10 s
    assert reason is not None
    assert "/device:GPU:0 has held 1000 MiB of its 1024 MiB cap (98%, at least 90%)" in reason
    assert watch.streaks() == {"/device:GPU:0": 10.0}
    current[0] = 100  # it let go: not stuck any more, and the count starts again
    assert watch.sample() is None and watch.streaks() == {}


def test_a_busy_process_that_dips_between_steps_is_not_stuck() -> None:
    watch, clock, current = watch_of([1000])
    for step in range(100):  # at the cap most of the time, below it one sample in five
        current[0] = 700 if step % 5 == 4 else 1000
        assert watch.sample() is None, step
        clock.now += 1


def test_exit_says_one_line_counts_and_exits_75(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(recovery.STATE_DIR_VARIABLE, str(tmp_path))
    watch, _, _ = watch_of([1000])
    codes: list[int] = []
    recovery.end(watch, "/device:GPU:0 has held …", exit=codes.append)
    recovery.end(watch, "/device:GPU:0 has held …", exit=codes.append)
    assert codes == [EXIT_STUCK, EXIT_STUCK]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("tfgpu: recovery: /device:GPU:0 has held")
    assert "exiting with 75" in lines[0] and "TF_GPU_RECOVER_AT=90%" in lines[0]
    assert "recovery 2 of this container" in lines[1]
    path = Path(recovery.record_path())
    assert json.loads(path.read_text())["count"] == 2 and recovery.recoveries() == 2
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_record_never_follows_a_planted_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    link = tmp_path / "record.json"
    link.symlink_to(target)
    assert recovery.record(str(link)) == 0 and recovery.recoveries(str(link)) == 0
    assert target.read_text() == "precious"


def test_livez_follows_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """/livez on the metrics server: 200 while healthy, 503 with the reason while stuck."""
    watch, clock, _ = watch_of([1000], after_s=1)
    monkeypatch.setitem(recovery._state, "watch", watch)
    saved = dict(metrics._state)
    metrics._state.update(attempted=False, server=None, port=None)
    port = free_port()
    env = {"TF_GPU_METRICS_PORT": str(port), "TF_GPU_METRICS_ADDR": "127.0.0.1"}
    try:
        assert metrics.start_from_environment(None, env) is True
        url = f"http://127.0.0.1:{port}/livez"
        watch.sample()
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.status == 200 and r.read() == b"ok\n"
        clock.now += 2
        watch.sample()
        with pytest.raises(urllib.error.HTTPError) as stuck:
            urllib.request.urlopen(url, timeout=5)
        assert stuck.value.code == 503
        assert stuck.value.read().decode().startswith("stuck: /device:GPU:0 has held")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        assert "tfgpu_recovery_stuck 1.0" in text and "tfgpu_recovery_after_seconds 1.0" in text
        assert 'tfgpu_recovery_streak_seconds{device="/device:GPU:0"} 2.0' in text
        assert "tfgpu_recoveries_total" in text
    finally:
        server = metrics._state["server"]
        if server is not None:
            server.shutdown()
            server.server_close()
        metrics._state.clear()
        metrics._state.update(saved)


def test_interval_is_a_tenth_of_the_period_within_bounds() -> None:
    assert recovery.interval_s(RecoveryRule(0.9, 1, "exit")) == 0.2
    assert recovery.interval_s(RecoveryRule(0.9, 20, "exit")) == 2.0
    assert recovery.interval_s(RecoveryRule(0.9, 3600, "exit")) == 5.0


def test_uid_in_the_record_name() -> None:
    assert recovery.record_path({}) == f"/var/tmp/tfgpu-recoveries-{os.getuid()}.json"


# --- the record and the exit path (security findings) ------------------------------------------


def _in_thread(call: Any, seconds: float = 5.0) -> tuple[bool, list[Any]]:
    """Run `call` on a daemon thread; (finished within `seconds`, [its result])."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), out


def _unblock(fifo: Path) -> None:
    """Open both ends of the FIFO once, so that a thread blocked on it (today's main) returns."""
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, flags))


def test_a_fifo_at_the_record_blocks_neither_a_scrape_nor_the_exit(tmp_path: Path) -> None:
    """A FIFO planted at the record (another uid of a shared /var/tmp) made the open block:
    every /metrics scrape and the `exit` action hung."""
    fifo = tmp_path / "record.json"
    os.mkfifo(fifo)
    try:
        done, out = _in_thread(lambda: recovery.recoveries(str(fifo)))
        assert done and out == [0]
        done, out = _in_thread(lambda: recovery.record(str(fifo)))
        assert done and out == [0]
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
    finally:
        _unblock(fifo)


def test_another_uids_record_is_never_wiped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record was opened with O_TRUNC before its owner was checked: another uid's 0666
    record was emptied. Here the file is this test's, and the process pretends another uid."""
    path = tmp_path / "record.json"
    path.write_text('{"count": 7}')
    path.chmod(0o666)
    monkeypatch.setattr(os, "getuid", lambda: path.stat().st_uid + 1)
    assert recovery.record(str(path)) == 0 and recovery.recoveries(str(path)) == 0
    assert path.read_text() == '{"count": 7}'


def test_a_record_too_deep_for_json_reads_as_none_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text("[" * 100000)
    assert recovery.recoveries(str(path)) == 0
    assert recovery.record(str(path)) == 1 and json.loads(path.read_text())["count"] == 1


_FULL_DISK = """
import resource, signal
from tfgpu.act import recovery
from tfgpu.contract.recovery_rule import RecoveryRule
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no byte may be written
recovery.end(recovery.Watch(RecoveryRule(0.9, 10, "exit"), list), "/device:GPU:0 has held …")
"""


def test_a_full_disk_on_the_exit_path_still_exits_75_and_keeps_the_record(tmp_path: Path) -> None:
    """A full /var/tmp (here: a file-size limit of 0, which fails every write as a full disk
    does) raised OSError in the watch thread: no exit 75, and (O_TRUNC) an emptied record."""
    record = tmp_path / f"tfgpu-recoveries-{os.getuid()}.json"
    record.write_text('{"count": 2}')
    env = {**os.environ, recovery.STATE_DIR_VARIABLE: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _FULL_DISK], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == EXIT_STUCK, done.stderr
    [line] = done.stderr.splitlines()
    assert "exiting with 75" in line and "not counted: OSError: [Errno 27]" in line, line
    assert record.read_text() == '{"count": 2}'  # neither emptied nor half-written


@pytest.mark.parametrize("failure", ["deep record", "stderr closed"])
def test_every_failure_on_the_exit_path_still_exits_75(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    """A same-uid record of '[' * 100000 raised RecursionError in the watch thread (no exit 75);
    a closed stderr must not stop the exit either."""
    monkeypatch.setenv(recovery.STATE_DIR_VARIABLE, str(tmp_path))
    path = Path(recovery.record_path())
    if failure == "deep record":
        path.write_text("[" * 100000)
    else:
        path.write_text('{"count": 2}')

        class Closed(io.StringIO):
            def write(self, text: str) -> int:
                raise ValueError("I/O operation on closed file")

        monkeypatch.setattr(sys, "stderr", Closed())
    watch, _, _ = watch_of([1000])
    codes: list[int] = []
    recovery.end(watch, "/device:GPU:0 has held …", exit=codes.append)
    assert codes == [EXIT_STUCK]
    if failure == "deep record":
        [line] = capsys.readouterr().err.splitlines()
        assert "exiting with 75" in line and "recovery 1 of this container" in line, line
    assert json.loads(path.read_text())["count"] == (1 if failure == "deep record" else 3)

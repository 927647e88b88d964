"""The fake driver's shared ledger (FAKEGPU_LEDGER), used by containers of
several uids at once, follows no planted link and lets no uid change another's entries.

Its files: the folder 1777 (made so only by the process that created it), ledger.lock and each
TOKEN.lock 0444 (flock needs only a read-only descriptor), each TOKEN.live 0644 (written by its
process alone). The other uid here is 1000, as the Jupyter images' user; its steps are plain
Python (subprocess user=1000), the fake's files being the subject."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from tests.fakegpu.conftest import Runner
from tests.fakegpu.test_memory import HOLD, READ

GIB = 1 << 30
OTHER_UID = 1000

# the other uid's steps are stdlib Python, run by the system's interpreter (the test's own may
# live under a folder uid 1000 cannot read, such as /root)
SYSTEM_PYTHON = "/usr/bin/python3"
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="acting as another uid needs root and /usr/bin/python3",
)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every uid can reach (pytest's tmp_path is root's 0700)."""
    path = Path(tempfile.mkdtemp(prefix="tfgpu-ledger-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_other_uid(code: str, *, wait: bool = True) -> Popen[str]:
    """Python `code` run as uid 1000; it prints one JSON line."""
    child = subprocess.Popen(
        [SYSTEM_PYTHON, "-c", "import json, os, fcntl, sys\n" + code],
        user=OTHER_UID,
        group=OTHER_UID,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if wait:
        child.wait(timeout=30)
    return child


def test_a_link_at_the_ledger_path_is_refused_and_its_target_untouched(
    run: Runner, tmp_path: Path
) -> None:
    target = tmp_path / "someone-elses"
    target.mkdir()
    target.chmod(0o755)
    link = tmp_path / "ledger"
    link.symlink_to(target)
    child = run("out['init'] = cu.cuInit(0)\n", {"FAKEGPU_LEDGER": str(link)})
    assert child.out["init"] == 1  # CUDA_ERROR_INVALID_VALUE
    assert "invalid FAKEGPU_LEDGER" in child.stderr and "symbolic link" in child.stderr
    assert target.stat().st_mode & 0o7777 == 0o755  # it became drwxrwxrwt on 02fe03f


def test_an_existing_folder_keeps_its_mode(run: Runner, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    ledger.chmod(0o700)
    run("out['init'] = cu.cuInit(0)\n", {"FAKEGPU_LEDGER": str(ledger)})
    assert ledger.stat().st_mode & 0o7777 == 0o700  # only its creator makes it 1777


@needs_root
def test_no_ledger_file_is_writable_by_another_uid(
    spawn: Callable[..., Popen[str]], shared: Path
) -> None:
    env = {"FAKEGPU_MEMORY_MIB": "4096", "FAKEGPU_LEDGER": str(shared / "ledger")}
    holder = spawn(HOLD, env)
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline())["alloc"] == 0
        ledger = shared / "ledger"
        (live,) = ledger.glob("*.live")
        modes = {p.name: p.stat().st_mode & 0o7777 for p in ledger.iterdir()}
        assert ledger.stat().st_mode & 0o7777 == 0o1777
        assert modes[live.name] == 0o644
        assert modes[live.name.replace(".live", ".lock")] == 0o444
        assert modes["ledger.lock"] == 0o444
        assert not any(mode & 0o002 for mode in modes.values())  # nothing world-writable
        other = as_other_uid(
            f"""
live = {str(live)!r}
out = {{}}
for what, act in [
    ("append", lambda: open(live, "a")),
    ("unlink", lambda: os.unlink(live)),
    ("replace", lambda: os.rename({str(ledger / "mine")!r}, live)),
    ("lock-write", lambda: open({str(ledger / "ledger.lock")!r}, "a")),
]:
    if what == "replace":
        open({str(ledger / "mine")!r}, "w").close()
    try:
        act()
        out[what] = "done"
    except PermissionError:
        out[what] = "refused"
fd = os.open({str(ledger / "ledger.lock")!r}, os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)  # joining the ledger needs no more than this
out["flock"] = "ok"
print(json.dumps(out))
"""
        )
        assert other.stdout is not None
        result = json.loads(other.stdout.read())
        assert result == {
            "append": "refused",
            "unlink": "refused",
            "replace": "refused",
            "lock-write": "refused",
            "flock": "ok",
        }, other.stderr
    finally:
        holder.communicate("", timeout=10)


@needs_root
def test_another_uid_cannot_keep_a_stale_entry_alive(
    run: Runner, spawn: Callable[..., Popen[str]], shared: Path
) -> None:
    """A .live whose process is gone counts only while its own writer's lock is held: a lock
    of the same name made and held by another uid does not revive it."""
    env = {"FAKEGPU_MEMORY_MIB": "4096", "FAKEGPU_LEDGER": str(shared / "ledger")}
    holder = spawn(HOLD, env)
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline())["alloc"] == 0
        ledger = shared / "ledger"
        (live,) = ledger.glob("*.live")
        body = live.read_text().replace(live.stem, "f0f0f0f0f0f0f0f0")
        forged = ledger / "f0f0f0f0f0f0f0f0.live"
        forged.write_text(body)  # root's, like the writer of a dead process's entry
        forged.chmod(0o644)
        keeper = as_other_uid(
            f"""
fd = os.open({str(ledger / "f0f0f0f0f0f0f0f0.lock")!r}, os.O_RDONLY | os.O_CREAT, 0o444)
fcntl.flock(fd, fcntl.LOCK_EX)
print(json.dumps({{"held": True}}), flush=True)
sys.stdin.read()
""",
            wait=False,
        )
        try:
            assert keeper.stdout is not None
            assert json.loads(keeper.stdout.readline()) == {"held": True}, keeper.stderr
            out = run(READ, env).out
            assert out["info"] == [1 * GIB, 4 * GIB]  # the holder's 3 GiB, not 6
        finally:
            keeper.communicate("", timeout=10)
    finally:
        holder.communicate("", timeout=10)

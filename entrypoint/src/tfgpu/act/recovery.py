"""Recovery: a process that stays at its memory cap ends itself, or says it is unhealthy.

TensorFlow's memory set-up is fixed once its runtime starts, so a process stuck at its cap
(fragmentation, a leak, a batch that no longer fits) cannot be helped from inside: the way
out is a new process. Docker restarts a container only when its process exits (its restart
policies do not act on `unhealthy`); Kubernetes restarts one whose liveness probe fails. The
rule (tfgpu.contract.recovery_rule, TF_GPU_RECOVER_*) decides when a process is stuck; this module
watches for it and acts:

- a daemon thread samples, every `after/10` seconds (0.2 s to 5 s), the in-use bytes of each
  capped logical GPU (`tf.config.experimental.get_memory_info`, the figure the metrics serve),
  only once TensorFlow's runtime is up (reading earlier would start it: tfgpu.act.tf_memory);
- a device is stuck when it was at or above the share of its cap at **every** sample for the
  whole period; one sample below starts the count again. A busy process whose memory rises
  and falls with its steps is therefore not stuck; one whose steady state sits at the cap is,
  which is the point (raise the cap or the share if that is its normal state);
- `report`: /livez on the metrics port answers 503 with the reason while stuck (200 when not);
- `exit`: one line on stderr with the figures and the rule, the recovery is counted (below),
  and the process ends with exit code 75 (os._exit: a stuck process's clean-up could block;
  the driver frees its GPU memory either way). The image's entrypoint passes the code on, so
  the container exits 75 and Docker's `on-failure` policy restarts it.

What is not watched: an allocation that failed at the cap. TensorFlow reports it only to the
code that asked for it (a `ResourceExhaustedError` raised in that thread, which programs often
catch) and in its C++ log (`bfc_allocator.cc`: "Allocator (GPU_0_bfc) ran out of memory
trying to allocate …"), neither of which the kit can observe reliably from another thread.

Counting recoveries: each exit adds one to a small record, `tfgpu-recoveries-<uid>.json` in
TFGPU_STATE_DIR (default /var/tmp). A container restarted by Docker keeps its files, and a
Kubernetes pod keeps an emptyDir there across container restarts (`build.py k8s` mounts one),
so the next process serves the count as `tfgpu_recoveries_total`. The record is opened without
following links and without blocking (a FIFO planted there by another uid of a shared /var/tmp
hung every scrape), and read or written only when it is a regular file this uid owns. Every
failure on the exit path (a full disk, a broken record) is named in the exit line, and the
process still exits 75.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time

from tfgpu.act.tf_memory import logical_gpu_limits, runtime_initialized
from tfgpu.contract.recovery_rule import EXIT_STUCK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

    from tfgpu.contract.recovery_rule import RecoveryRule

    Reading = List[Tuple[str, float, float]]  # (logical device, in-use bytes, cap bytes)

STATE_DIR_VARIABLE = "TFGPU_STATE_DIR"
DEFAULT_STATE_DIR = "/var/tmp"
_MIB = 1 << 20
_RECORD_MAX_BYTES = 4096
_lock = threading.Lock()
_state: Dict[str, Any] = {"watch": None}


def interval_s(rule: RecoveryRule) -> float:
    return min(5.0, max(0.2, rule.after_s / 10))


class Watch:
    """The rule applied to successive readings; `clock` and `read` are injectable for tests."""

    def __init__(
        self,
        rule: RecoveryRule,
        read: Callable[[], Reading],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rule = rule
        self._read = read
        self._clock = clock
        self._since: Dict[str, float] = {}  # device -> when its current streak began
        self.reason: Optional[str] = None  # set while a device is stuck

    def sample(self) -> Optional[str]:
        now = self._clock()
        reason = None
        seen = set()
        for device, in_use, cap in self._read():
            seen.add(device)
            if cap <= 0 or in_use < self.rule.share * cap:
                self._since.pop(device, None)
                continue
            held = now - self._since.setdefault(device, now)
            if held >= self.rule.after_s and reason is None:
                reason = (
                    f"{device} has held {in_use / _MIB:.0f} MiB of its {cap / _MIB:.0f} MiB cap "
                    f"({in_use / cap:.0%}, at least {self.rule.share:.0%}) at every sample for "
                    f"{held:.0f} s"
                )
        for gone in set(self._since) - seen:
            del self._since[gone]
        with _lock:
            self.reason = reason
        return reason

    def streaks(self) -> Dict[str, float]:
        """Seconds each device has been at or above the share (0 for the others)."""
        now = self._clock()
        return {device: now - since for device, since in self._since.items()}


def read_tensorflow() -> Reading:
    """In-use and cap bytes of each capped logical GPU; nothing before the runtime is up."""
    if not runtime_initialized():
        return []
    tf = sys.modules["tensorflow"]
    out: Reading = []
    for device, cap_mib in logical_gpu_limits(tf):
        current = tf.config.experimental.get_memory_info(device)["current"]
        out.append((device, float(current), cap_mib * _MIB))
    return out


def start(rule: RecoveryRule) -> Watch:
    """Start watching (once per process); returns the watch."""
    with _lock:
        if _state["watch"] is not None:
            return _state["watch"]  # type: ignore[no-any-return]
        watch = Watch(rule, read_tensorflow)
        _state["watch"] = watch
    thread = threading.Thread(target=_loop, args=(watch,), name="tfgpu-recovery", daemon=True)
    thread.start()
    return watch


def _loop(watch: Watch, sleep: Callable[[float], None] = time.sleep) -> None:
    warned = False
    while True:
        sleep(interval_s(watch.rule))
        try:
            reason = watch.sample()
        except Exception as e:  # never let the watch break the program; say so once
            if not warned:
                warned = True
                sys.stderr.write(
                    f"tfgpu: warning: recovery: cannot read TensorFlow's memory figures "
                    f"({type(e).__name__}: {e}); the rule is not applied until it can\n"
                )
            continue
        if reason is not None and watch.rule.action == "exit":
            end(watch, reason)


def end(watch: Watch, reason: str, exit: Callable[[int], Any] = os._exit) -> None:
    """Say why, count, exit 75. Whatever fails on the way (a full /var/tmp, a broken record,
    stderr closed) is named in the line, and the process still exits 75: the rule's promise."""
    try:
        try:
            count, trouble = record(), ""
        except Exception as e:  # RecursionError and OSError included: counting is best effort
            count, trouble = 0, f": {type(e).__name__}: {e}"
        counted = f"recovery {count} of this container" if count else f"not counted{trouble}"
        sys.stderr.write(
            f"tfgpu: recovery: {reason}; exiting with {EXIT_STUCK} so that the container is "
            f"restarted and the GPU memory returns to the card ({watch.rule.describe()}; "
            f"{counted})\n"
        )
        sys.stderr.flush()
    except BaseException:  # nothing may keep the process from exiting 75
        pass
    finally:
        exit(EXIT_STUCK)


def current() -> Optional[Watch]:
    """The watch of this process, or None when the rule is off."""
    watch: Optional[Watch] = _state["watch"]
    return watch


def liveness() -> Tuple[bool, str]:
    """(alive, text) for /livez: not alive only while the rule judges the process stuck."""
    watch: Optional[Watch] = _state["watch"]
    if watch is None:
        return True, "ok: no recovery rule\n"
    with _lock:
        reason = watch.reason
    if reason is None:
        return True, "ok\n"
    return False, f"stuck: {reason} ({watch.rule.describe()})\n"


# --- the count of recoveries, kept across restarts of the container ----------------------------


def record_path(environ: Optional[Dict[str, str]] = None) -> str:
    env = os.environ if environ is None else environ
    directory = env.get(STATE_DIR_VARIABLE, "").strip() or DEFAULT_STATE_DIR
    return os.path.join(directory, f"tfgpu-recoveries-{os.getuid()}.json")


def _open_own(path: str, flags: int) -> Optional[int]:
    """An fd on `path` if it is a regular file this uid owns, else None. Checked before anything
    is read or truncated: O_NONBLOCK so that a FIFO planted there cannot block the open (a
    reader waits for a writer), O_NOFOLLOW so that no link is followed, then fstat for the
    type and the owner. Never O_TRUNC here: another uid's 0666 record is not ours to empty."""
    flags |= os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid == os.getuid() and stat.S_ISREG(st.st_mode):
            os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def recoveries(path: Optional[str] = None) -> int:
    """How many recoveries this container has made (0 when none or unreadable)."""
    fd = _open_own(path or record_path(), os.O_RDONLY)
    if fd is None:
        return 0
    with os.fdopen(fd, "rb") as f:
        text = f.read(_RECORD_MAX_BYTES)  # a record is ~40 bytes; bounded whatever is there
    try:
        count = json.loads(text).get("count", 0)
    except (ValueError, AttributeError, RecursionError):  # RecursionError: '[' * 100000
        return 0
    return count if isinstance(count, int) and count >= 0 else 0


def record(path: Optional[str] = None) -> int:
    """Add one recovery; returns the new count, or 0 when it cannot be kept. The record is
    written over in place and then cut to its new length: opening it with O_TRUNC emptied it
    first, and a full disk then left it empty. OSError is the caller's (end() names it)."""
    path = path or record_path()
    count = recoveries(path) + 1
    data = json.dumps({"count": count, "last": time.time()}).encode()
    fd = _open_own(path, os.O_WRONLY | os.O_CREAT)
    if fd is None:
        return 0
    with os.fdopen(fd, "wb") as f:
        f.write(data)  # over the old bytes, the file's length is fixed below
        f.flush()
        os.ftruncate(fd, len(data))
    return count

"""A writable HOME for `tfgpu run`'s command.

Jupyter, IPython, Keras, pip and matplotlib write under HOME (~/.local/share/jupyter/runtime,
~/.ipython, ~/.keras, ~/.cache, ~/.config). HOME is not writable in a container started with
`--read-only` (a read-only root file system, `readOnlyRootFilesystem` in Kubernetes) nor for
an arbitrary uid (`--user 12345:0`, OpenShift), whose HOME is `/`. Jupyter then stops at start
with `OSError: [Errno 30] Read-only file system: '/root/.local'`. So when HOME is not writable,
the command gets HOME=$TMPDIR/tfgpu-home-UID-RANDOM (TMPDIR defaults to /tmp: `--tmpfs /tmp`,
an emptyDir), or /dev/shm/tfgpu-home-UID-RANDOM where that is not writable, created for this uid
only; a variable the user set (JUPYTER_RUNTIME_DIR, IPYTHONDIR, XDG_*…) still wins, since each
tool reads its own first.

The name is unpredictable and new for each start: /tmp and /dev/shm are shared by every
uid (with `--ipc=host`, /dev/shm is the host's), and a fixed name could be created first by another
uid, leaving this one without a HOME. mkdir fails on any existing name (link or folder), so the
folder is never someone else's; random bytes come from os.urandom, not tempfile (whose import
costs start-up time for every `tfgpu run`).
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import List, Mapping, Optional


def _ours(path: str, uid: int) -> bool:
    """A real folder (not a link someone planted in a shared /tmp) of this uid, private."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077


def _private_folder(parent: str, uid: int) -> Optional[str]:
    """A new folder under `parent`, mode 700, with an unguessable name; None when `parent` is not
    writable."""
    for _ in range(8):  # a collision of 64 random bits means someone plants names: give up
        path = os.path.join(parent, f"tfgpu-home-{uid}-{os.urandom(8).hex()}")
        try:
            os.mkdir(path, 0o700)  # creates or fails: never an existing folder or link
        except FileExistsError:
            continue
        except OSError:
            return None
        if _ours(path, uid) and os.access(path, os.W_OK | os.X_OK):
            return path
        return None
    return None


def candidates(environ: Mapping[str, str]) -> List[str]:
    """Where a HOME may go: TMPDIR (or /tmp), then /dev/shm. Docker's `--tmpfs /tmp` is
    root's and not writable for other uids (mode 755) unless given `:mode=1777`, while
    /dev/shm is writable for every uid (1777) in Docker and Kubernetes alike; the files
    written there (Jupyter's runtime files, IPython's history) are small."""
    return list(dict.fromkeys([environ.get("TMPDIR") or "/tmp", "/dev/shm"]))


def writable_home(environ: Mapping[str, str]) -> Optional[str]:
    """A private folder of this uid under the first writable candidate, to use as HOME when
    HOME is not writable; None when there is none (the command then runs as it would have)."""
    uid = os.getuid()
    for parent in candidates(environ):
        path = _private_folder(parent, uid)
        if path is not None:
            return path
    return None

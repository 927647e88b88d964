"""Which worker runs which tests when `./kit test` runs on two xdist workers (owner: harness).

The container tests of the 2.21 family share session fixtures (the stand-ins, the kit's images, the
compose stack): built twice at once they would collide, so they run as one group, `engine`, on one
worker. The CUDA 11.8 images' module (`cuda11`) and the arm64 module (`arm64`) build images of
their own: a group each, which the other worker runs beside it, with the tests that need no
engine (each module a unit, as xdist's loadscope). Last comes `late`: container tests that start
from the kit's images as built (multi-worker training, the recovery probes, the BuildKit
comparison: some 9 minutes), for whichever worker is free first; that worker takes the images
the other built in this run (tests/engine_lock.py, `once`). Groups are handed out in
GROUP_ORDER, the rest in collection order before `late`.

Why not xdist's own `--dist loadgroup` and `xdist_group` marks: with pytest 9.2 the group no longer
reaches the scheduler (xdist 3.8 writes the group into `item._nodeid`, which pytest 9.2 no longer
reads; pytest-dev/pytest-xdist#1386, open), so every test would be scheduled on its own. Here the
workers write the group of each test to a file the controller names (`pytest_configure_node`), and
the scheduler below (xdist's LoadScopeScheduling with another `_split_scope`) reads it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

ENGINE = "engine"
LATE = "late"
GROUPS = {
    "tests/gpu/test_cuda11_images.py": "cuda11",
    "tests/containers/test_l4t_arm64.py": "arm64",
    "tests/multiworker/test_multiworker.py": LATE,
    "tests/multiworker/test_parameter_servers.py": LATE,
    "tests/gpu/test_recovery_probes.py": LATE,
    "tests/containers/test_buildkit.py": LATE,
}
GROUP_ORDER = (ENGINE, "cuda11", "arm64")  # then the ungrouped modules, then LATE
KEY = "tfgpu_groups_file"  # in each worker's workerinput


def group_of(item: pytest.Item) -> str | None:
    """The group of a test: `docker` tests have one; the others none (a unit per module)."""
    if item.get_closest_marker("docker") is None:
        return None
    return GROUPS.get(item.nodeid.split("::", 1)[0], ENGINE)


def order(items: list[pytest.Item]) -> dict[str, str]:
    """Sort the items by group (GROUP_ORDER, then the rest, then LATE, each in collection order);
    returns the group of each grouped test by id."""
    groups = {item.nodeid: g for item in items if (g := group_of(item)) is not None}

    def rank(item: pytest.Item) -> int:
        group = groups.get(item.nodeid)
        if group == LATE:
            return len(GROUP_ORDER) + 1
        return GROUP_ORDER.index(group) if group else len(GROUP_ORDER)

    items.sort(key=rank)
    return groups


def new_groups_file() -> str:
    """On the controller: the file the workers will write (one per run)."""
    fd, path = tempfile.mkstemp(prefix="tfgpu-xdist-groups-", suffix=".json")
    os.close(fd)
    return path


def write(path: str, groups: dict[str, str]) -> None:
    """On a worker: the groups it collected (every worker collects the same; the last one wins,
    written whole: a temporary file renamed over the target)."""
    partial = Path(f"{path}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)


class GroupScheduling(LoadScopeScheduling):
    """LoadScopeScheduling whose unit of work is a test's group, else its module."""

    def __init__(self, config: pytest.Config, log: Any = None, *, groups_file: str) -> None:
        super().__init__(config, log)
        self._groups_file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first called once every worker has collected (and written)
            text = Path(self._groups_file).read_text()
            self._groups = json.loads(text) if text else {}
        group = self._groups.get(nodeid)
        return f"group:{group}" if group else nodeid.rsplit("::", 1)[0]

"""The order in which the suite's groups reach the two xdist workers (tests/xdist_groups.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests import xdist_groups


@dataclass
class Item:
    """What xdist_groups reads of a pytest.Item: its id and whether it is marked `docker`."""

    nodeid: str
    docker: bool

    def get_closest_marker(self, name: str) -> Any:
        return object() if name == "docker" and self.docker else None


def test_groups_go_engine_cuda11_arm64_then_the_rest_then_late() -> None:
    items = [
        Item("tests/multiworker/test_multiworker.py::test_a", docker=True),
        Item("tests/runtime/test_settings.py::test_b", docker=False),
        Item("tests/containers/test_l4t_arm64.py::test_c", docker=True),
        Item("tests/gpu/test_recovery_probes.py::test_d", docker=True),
        Item("tests/containers/test_image.py::test_e", docker=True),
        Item("tests/gpu/test_cuda11_images.py::test_f", docker=True),
        Item("tests/multiworker/test_parameter_servers.py::test_render", docker=False),
    ]
    groups = xdist_groups.order(items)  # type: ignore[arg-type]
    assert [i.nodeid.rsplit("::", 1)[1] for i in items] == [
        "test_e", "test_f", "test_c", "test_b", "test_render", "test_a", "test_d"
    ]  # fmt: skip
    assert groups == {
        "tests/containers/test_image.py::test_e": "engine",
        "tests/gpu/test_cuda11_images.py::test_f": "cuda11",
        "tests/containers/test_l4t_arm64.py::test_c": "arm64",
        "tests/multiworker/test_multiworker.py::test_a": "late",
        "tests/gpu/test_recovery_probes.py::test_d": "late",
    }


def test_every_named_module_exists() -> None:
    """A renamed module would silently fall back to the engine group."""
    for path in xdist_groups.GROUPS:
        assert (xdist_groups.Path(__file__).parent.parent / path).is_file(), path

"""Suite-wide test policy (owner: harness).

- Tests marked `docker` need a running Docker engine. Locally, without one, they
  are skipped with the reason. With `CI=true` an unreachable engine is an
  *error* in every such test, never a skip, and a run in which no `docker` test
  passed fails: a green CI run means the container tests ran.
- The container tests take their images from the engine; they build none of them
  (tests/kit_images.py: `./kit test-images` builds them before pytest).
- `./kit test` runs on two pytest-xdist workers (pyproject.toml: `-n 2 --dist loadscope`):
  each module is one unit of work, so its module-scoped fixtures are made once.
- At the end, one line per test group (directory under tests/, and the `docker`
  marker) says what ran, so the CI log shows it, and a group with test files of
  which nothing was collected is named. Under CI=true, in a whole-suite run (no paths given),
  such a group fails the run: a directory pytest silently does not collect (e.g.
  `build/` is in pytest's default `norecursedirs`) must not look green.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from rich.logging import RichHandler

ROOT = Path(__file__).resolve().parent.parent
# `import tests.base_standins` and `import tfgpu_kit` need the checkout on sys.path; `python
# -m pytest` (./kit test) has it, a bare `pytest` does not.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The images the container tests take from the engine (tests/kit_images.py).
pytest_plugins = ["tests.kit_images"]

from tests.ci_policy import ci_or_skip, in_ci  # noqa: E402 (needs the sys.path line above)
from tests.gpu import report as claims_report  # noqa: E402

# What each xdist worker handed over of its GPU claims (tests/gpu/report.py)
_gpu_claims: list[str] = []


@pytest.fixture(autouse=True)
def _kit_logging_undone() -> Iterator[None]:
    """A test that runs cli.main in-process gets build.py's logging (log.setup: a stderr handler on
    the root logger, its level): undone after the test, so no later test sees its output."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in before and isinstance(h, RichHandler)]:
        root.removeHandler(handler)
    root.setLevel(level)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tfgpu GPU tests (tests/gpu)")
    group.addoption(
        "--real-gpu",
        action="store_true",
        help="run tests/gpu against this host's real GPUs (Docker with the NVIDIA runtime or "
        "CDI) instead of the fake driver; detected when a driver and such an engine are present",
    )
    group.addoption(
        "--gpu-image",
        metavar="IMAGE",
        help="the kit image tests/gpu runs (default: the 2.21 gpu image `./kit test-images` "
        "builds from the stand-ins)",
    )
    group.addoption(
        "--gpu-slim-image",
        metavar="IMAGE",
        help="the slim kit image tests/gpu also runs (default: the 2.21 gpu-slim image `python -m "
        "tests.prepare` builds; with --gpu-image alone the slim runs are skipped)",
    )


@cache
def engine_problem() -> str | None:
    """Why no Docker engine can be used, or None when one answers."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The container tests first (a stable sort, the same on every worker): the long modules are
    handed out while the short ones are left to even out the workers' ends."""
    items.sort(key=lambda item: item.get_closest_marker("docker") is None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """On the xdist controller, which collects nothing itself: what each worker collected (the
    same on every worker), for the groups' summary."""
    _collected.update(_group(nodeid) for nodeid in ids)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the controller: a worker's GPU claims, for the one gpu-report.json."""
    output = getattr(node, "workeroutput", {})
    if handed := output.get(claims_report.KEY):
        _gpu_claims.append(handed)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is None:
        return
    problem = engine_problem()
    if problem is None:
        return
    ci_or_skip(problem, in_ci_because="; container tests must run in CI")


def _group(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


_outcomes: dict[str, Counter[str]] = defaultdict(Counter)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # One outcome per test: the call phase, or setup/teardown when they fail/skip.
    if report.when == "call" or report.outcome != "passed":
        outcome = "error" if report.when != "call" and report.failed else report.outcome
        groups = [_group(report.nodeid)]
        if "docker" in report.keywords:
            groups.append("marker:docker")
        for group in groups:
            _outcomes[group][outcome] += 1


_collected: set[str] = set()


def pytest_itemcollected(item: pytest.Item) -> None:
    _collected.add(_group(item.nodeid))


def _groups_not_collected() -> list[str]:
    """Directories under tests/ holding test files of which no test was collected."""
    have_tests = {
        d.name for d in (ROOT / "tests").iterdir() if d.is_dir() and any(d.rglob("test_*.py"))
    }
    return sorted(have_tests - _collected)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if _worker(config) or not _outcomes:
        return
    terminalreporter.section("test groups that ran")
    for group in sorted(_outcomes):
        counts = ", ".join(f"{n} {what}" for what, n in sorted(_outcomes[group].items()))
        terminalreporter.write_line(f"{group:>16}: {counts}")
    if config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        for group in _groups_not_collected():
            terminalreporter.write_line(
                f"{group:>16}: NOT COLLECTED (tests/{group} has test files, pytest found none)",
                red=True,
            )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _worker(session.config):
        return  # the controller judges the whole run
    if _gpu_claims:
        claims_report.write_merged(_gpu_claims)
    if not in_ci() or exitstatus != 0:
        return
    # A CI run whose container tests were all deselected or skipped is not green.
    if _outcomes.get("marker:docker", Counter())["passed"] == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        print("\nCI=true but no test marked `docker` passed: the container tests did not run.")
    whole_suite = session.config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if whole_suite and (missing := _groups_not_collected()):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        where = ", ".join(f"tests/{g}" for g in missing)
        print(f"\nCI=true but pytest collected nothing in: {where}.")

"""The suite's CI policy (tests/conftest.py) tested on a tiny suite of its own.

Each case copies the real tests/conftest.py, unchanged, into a pytester directory
laid out like this checkout (`tests/<group>/test_*.py`, `testpaths = ["tests"]`) and
runs pytest on it in a subprocess, against an engine that cannot answer
(`DOCKER_HOST=unix:///nonexistent.sock`). A subprocess, not pytester's in-process
run: both conftests would be the top-level module `conftest` in one interpreter.
Nothing here needs a Docker engine, and nothing is marked `docker`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

POLICY = Path(__file__).with_name("conftest.py")
CI_POLICY = Path(__file__).with_name("ci_policy.py")  # the conftest's helpers, copied with it
GPU_REPORT = Path(__file__).with_name("gpu") / "report.py"
NO_ENGINE = "unix:///nonexistent.sock"

INI = """\
[pytest]
testpaths = tests
markers =
    docker: needs a running Docker engine
"""
DOCKER_TEST = """\
import pytest

@pytest.mark.docker
def test_needs_an_engine():
    pass
"""
PLAIN_TEST = """\
def test_needs_nothing():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """tests/conftest.py (the real one), tests/containers with a docker test,
    tests/unit with a plain one; no engine; CI unset (each test sets it)."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "conftest.py").write_text(POLICY.read_text())
    (pytester.path / "tests" / "ci_policy.py").write_text(CI_POLICY.read_text())
    (pytester.path / "tests" / "gpu").mkdir()
    (pytester.path / "tests" / "gpu" / "report.py").write_text(GPU_REPORT.read_text())
    # the plugin the real conftest loads (the image fixtures): none is used by this tiny suite
    (pytester.path / "tests" / "kit_images.py").write_text('"""No fixtures needed here."""\n')
    for group, source in (("containers", DOCKER_TEST), ("unit", PLAIN_TEST)):
        (pytester.path / "tests" / group).mkdir()
        (pytester.path / "tests" / group / f"test_{group}.py").write_text(source)
    pytester.makeini(INI)
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    monkeypatch.delenv("CI", raising=False)
    # The inner suite needs no third-party plugin; loading none keeps each run short.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=60)


# The policy holds on one process and as `./kit test` runs (pyproject.toml): on two xdist workers,
# where the controller, which collects nothing, judges the run from the workers' reports.
WORKERS = pytest.mark.parametrize(
    "workers",
    [[], ["-p", "xdist.plugin", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]],
    ids=["one-process", "two-xdist-workers"],
)


@WORKERS
def test_ci_makes_a_docker_test_an_error_without_an_engine(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    monkeypatch.setenv("CI", "true")
    result = run(suite, *workers)
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "ERROR tests/containers/test_containers.py::test_needs_an_engine* - Failed: "
            "CI=true: no Docker engine answers (*); container tests must run in CI",
        ]
    )
    result.stdout.fnmatch_lines(["*marker:docker: 1 error*"])


def test_without_ci_a_docker_test_is_skipped_with_the_reason(suite: pytest.Pytester) -> None:
    result = run(suite)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["SKIPPED * no Docker engine answers (*) (set CI=true to make this an error)"]
    )
    assert "no test marked `docker` passed" not in result.stdout.str()


@pytest.mark.parametrize(
    "selection",
    [["-m", "not docker"], ["tests/unit"]],
    ids=["deselected-by-marker", "unit-path-only"],
)
@WORKERS
def test_ci_fails_a_run_in_which_no_docker_test_passed(
    suite: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    selection: list[str],
    workers: list[str],
) -> None:
    monkeypatch.setenv("CI", "true")
    result = run(suite, *selection, *workers)
    result.assert_outcomes(passed=1)  # every test that ran passed …
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # … and the run still fails
    result.stdout.fnmatch_lines(
        ["CI=true but no test marked `docker` passed: the container tests did not run."]
    )
    assert "marker:docker" not in result.stdout.str()  # no empty summary line for it


@WORKERS
def test_ci_fails_a_whole_suite_run_with_a_directory_collected_from_nothing(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    """tests/build is in pytest's default norecursedirs: its tests are silently not
    collected, the case this policy was written for (pyproject.toml now overrides
    norecursedirs; this inner suite keeps pytest's default)."""
    (suite.path / "tests" / "build").mkdir()
    (suite.path / "tests" / "build" / "test_build.py").write_text(PLAIN_TEST)
    (suite.path / "tests" / "containers" / "test_containers.py").unlink()
    (suite.path / "tests" / "containers" / "test_other.py").write_text(PLAIN_TEST)
    monkeypatch.setenv("CI", "true")
    result = run(suite, *workers)
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["CI=true but pytest collected nothing in: tests/build."])
    result.stdout.fnmatch_lines(
        ["*build: NOT COLLECTED (tests/build has test files, pytest found none)"]
    )
    # A run given paths is not the whole suite: tests/build is then not required.
    partial = run(suite, "tests/unit", "tests/containers", *workers)
    assert "collected nothing" not in partial.stdout.str()

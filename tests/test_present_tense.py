"""The code and the docs say what is, not which of our tickets asked for it.

A reader of the tree has no access to the kit's issue tracker: a comment, docstring or doc line
that cites one of its tickets (the word "issue" followed by its number) explains nothing to them,
and goes stale as the code moves on. Each such line should say what the code does and why. Upstream
citations are sources and stay: `owner/repo#N`, and URLs ending in `/issues/N`.

Read: every text file a commit would carry (`read`), but the LICENSE, the locks and the
generated Dockerfiles.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_docs_self_contained import repository_files

ROOT = Path(__file__).resolve().parents[1]

# The word, singular or plural, then a number (with an optional space and `#`); not inside a
# path, a URL or a repository name (no name, `/`, `.` or `-` just before it).
OURS = re.compile(r"(?<![\w/.-])issues? ?#?\d+", re.IGNORECASE)
BINARY = (".whl", ".png", ".gz", ".tar", ".so", ".ico")


def read(rel: str) -> bool:
    """Whether the check reads this file (a path relative to the repository root): every text
    file a person writes, but the LICENSE; not the locks and the generated Dockerfiles (their
    sources, requirements/*.in and templates/, are read)."""
    if rel == "LICENSE" or rel.endswith(".lock") or rel.startswith("dockerfiles/"):
        return False
    return not rel.endswith(BINARY)


def files() -> list[str]:
    """What a commit would carry (repository_files), the ones this check reads."""
    rels = (path.relative_to(ROOT).as_posix() for path in repository_files())
    return sorted(rel for rel in rels if read(rel))


def references(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each line that cites our tracker."""
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if OURS.search(line)]


def test_no_file_cites_our_issue_tracker() -> None:
    found = [
        f"{rel}:{n}: {line.strip()}"
        for rel in files()
        for n, line in references((ROOT / rel).read_text(encoding="utf-8", errors="replace"))
    ]
    assert found == [], "say what the code does, not which ticket asked:\n" + "\n".join(found)


def test_the_pattern_tells_ours_from_upstream() -> None:
    """Spelt in pieces, so that this file does not match itself."""
    word = "iss" + "ue"
    assert references(f"# {word} 22: it was 0755") == [(1, f"# {word} 22: it was 0755")]
    assert references(f'"""{word.title()} 30, part A: the inputs."""')
    for ours in (f"({word}s 17 and 22)", f"{word} #31", f"{word}22", f"an {word.upper()} 5"):
        assert references(ours), ours
    for upstream in (
        "tensorflow/tensorflow#60739",
        "https://github.com/x/y/" + word + "s/5",
        "kubeflow/trainer #3258",
        "pytest-dev/pytest-xdist#1386",
        f"an {word} of the driver (see below)",
        f"tf-{word} 4",  # part of a name
    ):
        assert references(upstream) == [], upstream


def test_the_check_reads_the_files_it_names() -> None:
    read_here = files()
    for rel in (
        "build.py",
        "README.md",
        "docs/harness.md",
        "images/images.yaml",
        "templates/Dockerfile.j2",
        "tfgpu_kit/matrix/spec.py",
        "entrypoint/src/tfgpu/commands/run.py",
        "tests/test_present_tense.py",
        "benchmarks/bench_runtime.py",
        "tools/import_floors.py",
        "fakegpu/__init__.py",
        "fakegpu/fakegpu_core.c",
        "requirements/test.in",
        ".ci/run",
        "kit",
    ):
        assert rel in read_here, rel
    assert not any(rel.startswith((".venv/", "dockerfiles/")) for rel in read_here)

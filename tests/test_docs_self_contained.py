"""The repository stands alone: no file points outside it.

Facts are cited from primary sources (a repository, path and commit; PyPI metadata; NVIDIA's
documents), never from notes on the machine the kit was written on. So no file of the working
tree (tracked, or new and not ignored) may name a folder beside the checkout (the notes folder)
or that machine's paths, and no relative path in a file may climb out of the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Spelt in pieces so that this file does not match itself.
WORK = "/" + "work/"
FORBIDDEN = re.compile(
    "|".join(
        re.escape(s)
        for s in (
            ".." + "/shared",  # the folder next to the checkout where notes were kept
            WORK + "shared",
            WORK + "main",  # the checkout itself, by absolute path
            WORK + ".library",
            WORK + ".mirror",
        )
    )
)
# A relative path: one or more `../` not preceded by a name, `.`, `/` or `$` (so not `.../`,
# `$ORIGIN/../`, `a/../`), then a name.
RELATIVE = re.compile(r"(?<![\w.$/-])((?:\.\./)+)([\w.-]+)")


def repository_files() -> list[Path]:
    """Tracked files and new ones git does not ignore: what a commit would carry."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    paths = [ROOT / p for p in out.decode().split("\0") if p]
    return [p for p in paths if p.is_file()]


def text_of(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def test_the_file_list_covers_the_tree() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in repository_files()}
    assert {"README.md", "tests/runtime/tf_standin.py", "images/matrix.yaml"} <= files
    assert not any(f.startswith(".venv/") for f in files)  # ignored files are not scanned


def test_no_file_names_a_path_outside_the_repository() -> None:
    found: list[str] = []
    for path in repository_files():
        text = text_of(path)
        if text is None:
            continue
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(text.splitlines(), 1):
            found += [f"{rel}:{n}: {m.group(0)!r}" for m in FORBIDDEN.finditer(line)]
            for m in RELATIVE.finditer(line):
                target = (path.parent / (m.group(1) + m.group(2))).resolve()
                if not target.is_relative_to(ROOT):
                    found.append(f"{rel}:{n}: {m.group(0)!r} leaves the repository")
    assert found == [], "cite the primary source instead:\n" + "\n".join(found)


def test_the_check_catches_both_kinds(tmp_path: Path) -> None:
    """The patterns must match what they are for (or the test above proves nothing)."""
    assert FORBIDDEN.search("as listed in " + WORK + "shared/reference/facts.md")
    assert FORBIDDEN.search("see .." + "/shared/reference")
    m = RELATIVE.search("extend = '" + "../" * 3 + "outside.toml'")
    assert m is not None
    assert not (ROOT / "entrypoint" / (m.group(1) + m.group(2))).resolve().is_relative_to(ROOT)
    assert RELATIVE.search("$ORIGIN/../nvidia/cublas/lib") is None
    assert RELATIVE.search("ln -s .../libcuda.so.1") is None

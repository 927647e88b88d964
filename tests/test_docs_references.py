"""The docs name only what exists: every repository path and every `tfgpu` / `tfgpu_kit` module
that README.md and docs/*.md mention, and every relative link they make; and the same paths and
modules in the module docstrings of the Python files (tfgpu_kit/, entrypoint/src/tfgpu/, tests/,
benchmarks/), which are docs too.

A doc that names a renamed or moved file sends readers nowhere, so this fails on the first
stale name.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted(
    path
    for folder in ("tfgpu_kit", "entrypoint/src/tfgpu", "tests", "benchmarks")
    for path in (ROOT / folder).rglob("*.py")
)

TOP = "tfgpu_kit|entrypoint|tests|templates|images|dockerfiles|monitoring|examples|benchmarks"
TOP += r"|tools|docs|requirements|\.ci"
# A path from the repository root: a top-level folder, then names. Not inside a URL or another
# path (no name, `/` or `.` just before it).
PATH = re.compile(rf"(?<![\w/.:-])((?:{TOP})/[\w./-]*)")
# A dotted module path: tfgpu.contract.settings, tfgpu_kit.plan.caps.
MODULE = re.compile(r"(?<![\w./-])((?:tfgpu|tfgpu_kit)(?:\.[A-Za-z_]\w*)+)(?![\w/])")
# A relative markdown link: [text](target) with no scheme.
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[<>*{}…]|\bX\b|\.\.\.")

PACKAGES = {"tfgpu": ROOT / "entrypoint" / "src" / "tfgpu", "tfgpu_kit": ROOT / "tfgpu_kit"}


def doc_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def path_references(text: str) -> set[str]:
    out = set()
    for m in PATH.finditer(text):
        ref = m.group(1).rstrip(".,:;")
        if PLACEHOLDER.search(text[m.start() : m.end() + 1]):
            continue  # a pattern (dockerfiles/<version>-<variant>/), not a file
        out.add(ref)
    return out


def module_exists(dotted: str) -> bool:
    """The longest prefix that is a module or package must exist, and the first name after the
    package must be a module, a package or a name its __init__ defines."""
    top, *names = dotted.split(".")
    folder = PACKAGES[top]
    first = names[0]
    if (folder / f"{first}.py").is_file() or (folder / first / "__init__.py").is_file():
        return True
    init = (folder / "__init__.py").read_text(encoding="utf-8")
    return re.search(rf"^(?:def|class) {first}\b|^{first}\s*[:=]", init, re.M) is not None


def ignored(refs: list[str]) -> set[str]:
    """The paths git ignores: files a command writes (`build.py plan --prometheus-rules
    monitoring/plan.rules.yaml`, bake's `.tfgpu-contexts/`), named in .gitignore."""
    if not refs:
        return set()
    r = subprocess.run(
        ["git", "check-ignore", "--no-index", *refs], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode in (0, 1), r.stderr
    return set(r.stdout.split())


def missing_paths(text: str) -> list[str]:
    """The repository paths `text` names that do not exist, outputs git ignores apart."""
    absent = sorted(ref for ref in path_references(text) if not (ROOT / ref).exists())
    left_out = ignored(absent)
    return [ref for ref in absent if ref not in left_out]


def missing_modules(text: str) -> list[str]:
    names = {m.group(1) for m in MODULE.finditer(text)}
    return sorted(n for n in names if not module_exists(n))


def docstring(source: str) -> str:
    """The module docstring of Python source, "" when it has none."""
    return ast.get_docstring(ast.parse(source)) or ""


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_repository_path_in_the_docs_exists(doc: Path) -> None:
    """...or is an output the docs tell a command to write, which git ignores."""
    missing = missing_paths(doc.read_text())
    assert missing == [], f"{doc_id(doc)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_module_in_the_docs_exists(doc: Path) -> None:
    missing = missing_modules(doc.read_text())
    assert missing == [], f"{doc_id(doc)} names modules that do not exist: {missing}"


def test_every_path_and_module_in_a_module_docstring_exists() -> None:
    """One test for all the files (there are hundreds), naming each file with its stale names."""
    stale: dict[str, list[str]] = {}
    for path in SOURCES:
        text = docstring(path.read_text(encoding="utf-8"))
        if missing := missing_paths(text) + missing_modules(text):
            stale[doc_id(path)] = missing
    assert stale == {}, f"module docstrings name what does not exist: {stale}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_relative_link_in_the_docs_resolves(doc: Path) -> None:
    broken = []
    for m in LINK.finditer(doc.read_text()):
        target = m.group(1)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor of this page
        if not (doc.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert broken == [], f"{doc_id(doc)} links to files that do not exist: {broken}"


def test_the_checks_see_stale_names() -> None:
    """The patterns must catch what the docs were wrong about, or the tests above prove nothing."""
    text = "see `tfgpu_kit/matrix.py` and entrypoint/src/tfgpu/plan.py, then tfgpu.init."
    assert path_references(text) == {"tfgpu_kit/matrix.py", "entrypoint/src/tfgpu/plan.py"}
    assert not any((ROOT / ref).exists() for ref in path_references(text))
    assert [m.group(1) for m in MODULE.finditer(text)] == ["tfgpu.init"]
    assert MODULE.search("the annotation `tfgpu.io/processes`") is None
    assert not module_exists("tfgpu.init") and module_exists("tfgpu.commands.pid1")
    assert module_exists("tfgpu.contract.errors.ConfigError") and module_exists("tfgpu.is_disabled")
    assert path_references("https://github.com/org/repo/blob/main/docs/x.md") == set()
    assert path_references("`dockerfiles/<version>-<variant>/Dockerfile`") == set()
    assert ignored(["monitoring/plan.rules.yaml", "tfgpu_kit/matrix.py"]) == {
        "monitoring/plan.rules.yaml"
    }
    # every doc has at least one reference the tests check
    assert all(path_references(d.read_text()) or LINK.search(d.read_text()) for d in DOCS)
    # the docstring reader: the module's docstring only, and what the checks find in it
    source = '"""See tfgpu_kit/matrix.py, then tfgpu.init."""\nX = "tfgpu_kit/plan.py"\n'
    assert docstring(source) == "See tfgpu_kit/matrix.py, then tfgpu.init."
    assert missing_paths(docstring(source)) == ["tfgpu_kit/matrix.py"]
    assert missing_modules(docstring(source)) == ["tfgpu.init"]
    assert docstring('import os\n"""not the module\'s docstring"""\n') == ""
    # the files it reads: each folder's, and many docstrings name a path the checks see
    folders = {p.relative_to(ROOT).parts[0] for p in SOURCES}
    assert folders == {"tfgpu_kit", "entrypoint", "tests", "benchmarks"}
    named = [p for p in SOURCES if path_references(docstring(p.read_text(encoding="utf-8")))]
    assert len(named) > 50

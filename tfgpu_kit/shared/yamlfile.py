"""Reading the YAML files the kit is given (images/*.yaml, the lock, plan's compose files and
manifests), with one error that names the file and, for bad YAML, the line and column: never a
traceback. The caller picks the error class, and so the exit code (a spec: 3, a plan input: 2).

Plan's inputs are untrusted, so reading is bounded:
- a file is read only when it is a regular file or a pipe, and only up to MAX_BYTES (`/dev/zero`,
  another device or a huge file is refused before a byte is parsed);
- YAML aliases are not expanded past a budget: the composed node graph is measured as if every
  alias were copied out (MAX_EXPANDED_NODES) and as deep as MAX_DEPTH, and an alias that refers
  to a node containing itself (a recursive structure) is refused. PyYAML builds an alias as a
  shared reference, so a 578-byte "billion laughs" is small in memory, but any reader that walks
  or prints it walks every copy; the budget bounds every later walk by the file's expanded size.
Measuring the composed graph (before construction) keeps PyYAML's C parser: the budget applies
between `get_node()` and `construct_document()`, the loader's own two steps."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from tfgpu_kit.shared.errors import KitError, SpecError

# the C loader when PyYAML has it: several times faster than the pure-Python one
LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_BYTES = 8 * 1024 * 1024  # 8 MiB: a compose file or a manifest set is kilobytes
MAX_EXPANDED_NODES = 1_000_000  # nodes with every alias copied out (an 8 MiB file has fewer)
MAX_DEPTH = 256  # nesting of mappings and lists (Kubernetes objects nest ~15 deep)


class YamlLimitError(Exception):
    """A YAML document over a budget of this module (its message says which)."""


def load_yaml(path: Path | str, error: type[KitError] = SpecError) -> Any:
    """The one document of a YAML file."""
    docs = _load(Path(path), error, single=True)
    return docs[0] if docs else None


def load_documents(
    path: Path | str, error: type[KitError] = SpecError, unreadable: type[KitError] | None = None
) -> list[Any]:
    """Every non-empty document of a (multi-document) YAML file. `unreadable` is the error for a
    file that cannot be read at all (default: `error`)."""
    docs = _load(Path(path), error, single=False, unreadable=unreadable)
    return [doc for doc in docs if doc is not None]


def load_text(text: str) -> list[Any]:
    """The documents of YAML text found inside a file (a ConfigMap value), within the same
    budgets. Raises yaml.YAMLError or YamlLimitError."""
    return _parse(text, single=False)


def shown(text: str, limit: int = 200) -> str:
    """A name or value from a file, safe to print: control, format (bidi) and separator
    characters escaped as Python escapes them (`\\n`, `\\x1b`, `\\u202e`), and at most `limit`
    characters. Plain text is unchanged."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    if cut.isprintable():
        return cut
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)


def _load(
    path: Path, error: type[KitError], *, single: bool, unreadable: type[KitError] | None = None
) -> list[Any]:
    text = _text(path, unreadable or error)
    try:
        return _parse(text, single=single)
    except yaml.YAMLError as exc:
        raise _invalid(path, exc, error) from None
    except YamlLimitError as exc:
        raise error(
            f"{shown(str(path))}: refused: {exc}: accepted: YAML of at most "
            f"{MAX_EXPANDED_NODES:,} nodes with its aliases expanded, {MAX_DEPTH} levels deep, "
            "no alias inside its own anchor; example: write a repeated value out"
        ) from None


def _parse(text: str, *, single: bool) -> list[Any]:
    loader = LOADER(text)
    try:
        docs: list[Any] = []
        if single:
            node = loader.get_single_node()
            if node is not None:
                _measure(node)
                docs.append(loader.construct_document(node))
            return docs
        while loader.check_node():
            each = loader.get_node()
            if each is not None:
                _measure(each)
                docs.append(loader.construct_document(each))
        return docs
    except ValueError as exc:
        # int() of a number past Python's digit limit (sys.get_int_max_str_digits)
        raise YamlLimitError(f"a value cannot be read ({exc.args[0].split(':')[0]})") from None
    except RecursionError:
        # the pure-Python composer recurses per nesting level; the C one does not
        raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


def _measure(root: yaml.Node) -> None:
    """YamlLimitError when the document, with every alias copied out, has more than
    MAX_EXPANDED_NODES nodes, nests deeper than MAX_DEPTH, or contains itself. Iterative (an
    explicit stack), and each distinct node is visited once: its expanded size is memoised, so
    measuring a bomb costs its file size, not its expanded size."""
    size: dict[int, int] = {}  # id(node) → expanded node count, once finished
    open_nodes: set[int] = set()  # on the current path: reaching one again is a cycle
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        key = id(node)
        if children_done:
            total = 1 + sum(size[id(child)] for child in _children(node))
            if total > MAX_EXPANDED_NODES:
                raise YamlLimitError(
                    f"its aliases expand to more than {MAX_EXPANDED_NODES:,} YAML nodes "
                    "(an alias bomb, or a file far larger than a compose file or manifest set)"
                )
            size[key] = total
            open_nodes.discard(key)
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise YamlLimitError(
                "an alias refers to a node that contains it (a recursive structure)"
            )
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels")
        open_nodes.add(key)
        stack.append((node, depth, True))
        for child in _children(node):
            if id(child) not in size:
                stack.append((child, depth + 1, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _text(path: Path, error: type[KitError]) -> str:
    """The file's text, when it is a regular file or a pipe of at most MAX_BYTES of UTF-8."""
    name = shown(str(path))
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (with none, it reads as empty)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{name}: cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISFIFO(info.st_mode):
            # a pipe (`helm template … | ./kit plan /dev/stdin`): read as far as the cap allows
            os.set_blocking(fd, True)
        elif not stat.S_ISREG(info.st_mode):
            raise error(
                f"{name}: cannot be read (not a regular file or a pipe: a device, socket or "
                "folder); accepted: a YAML file, or /dev/stdin fed by a pipe"
            )
        elif info.st_size > MAX_BYTES:
            raise error(_too_big(name))
        with os.fdopen(fd, "rb", closefd=False) as stream:
            data = stream.read(MAX_BYTES + 1)  # a file growing while read stops here too
    except OSError as exc:
        raise error(f"{name}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise error(_too_big(name))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{name}: cannot be read (not UTF-8 text: {exc.reason})") from None


def _too_big(name: str) -> str:
    return (
        f"{name}: cannot be read (larger than {MAX_BYTES // (1024 * 1024)} MiB, the most a "
        "YAML input is read to; a compose file or manifest set is kilobytes)"
    )


def _invalid(path: Path, exc: yaml.YAMLError, error: type[KitError]) -> KitError:
    mark = getattr(exc, "problem_mark", None)
    where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return error(f"{shown(str(path))}:{where} not valid YAML ({shown(str(problem))})")

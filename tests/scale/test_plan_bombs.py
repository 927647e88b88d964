"""Hostile YAML given to `build.py plan`: alias bombs ("billion laughs") where
the readers walk or print a value, a `kind: List` fanning out, a List that contains itself,
endless nesting, devices and huge files. Each runs `build.py plan` in a child process under a
memory limit (RLIMIT_AS) and a time limit, and must end in one clean refusal."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 1536 * 1024 * 1024  # address space: the interpreter and its imports fit easily
TIME_LIMIT_S = 30.0  # each case must finish well within it (a few seconds on a slow CI runner)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_limited(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "build.py"),
            "plan",
            *args,
            "--gpu-memory",
            "16GiB",
            "--gpu-count",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        preexec_fn=_limit_memory,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def laughs(anchor_value: str, levels: int = 12) -> str:
    """Nine copies per level: 9**levels leaves from a file of about a kilobyte."""
    lines = [f"l0: &l0 {anchor_value}"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def bomb_in(where: Callable[[str], str]) -> str:
    """A YAML file whose `x-bomb` anchors the laughs and whose `where` uses the last one."""
    return where(laughs('"lol"'))


COMPOSE_GPU = "{driver: nvidia, capabilities: [gpu]"

BOMBS: dict[str, str] = {
    # the value a reader once turned into text with str()/repr()
    "configmap data": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
        + "".join(f"  {line}\n" for line in laughs('"lol"').splitlines())
    ),
    "compose env_file": (
        "x-bomb:\n"
        + "".join(f"  {line}\n" for line in laughs("a.env").splitlines())
        + "services:\n  a:\n    image: x\n    env_file: *l11\n"
        + f"    gpus: [{COMPOSE_GPU}, device_ids: ['0']}}]\n"
    ),
    "compose gpus.count": (
        "x-bomb:\n"
        + "".join(f"  {line}\n" for line in laughs("1").splitlines())
        + f"services:\n  a:\n    image: x\n    gpus: [{COMPOSE_GPU}, count: *l11}}]\n"
    ),
    "compose environment": (
        "x-bomb:\n"
        + "".join(f"  {line}\n" for line in laughs("x").splitlines())
        + "services:\n  a:\n    image: x\n    environment: {TF_GPU_MEM_LIMIT: *l11}\n"
    ),
    "merge keys": (
        "a0: &a0 {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8}\n"
        + "".join(
            f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 9)}], x{i}: 1}}\n"
            for i in range(1, 12)
        )
    ),
    "kind: List of 10^8 pods by aliases": (
        "apiVersion: v1\nkind: List\nx-defs:\n"
        "  p: &p {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: "
        "[{name: tf, resources: {limits: {nvidia.com/gpu: 1}}}]}}\n"
        + "".join(
            f"  l{i}: &l{i} {{apiVersion: v1, kind: List, items: "
            f"[{', '.join([('*p' if i == 0 else f'*l{i - 1}')] * 10)}]}}\n"
            for i in range(7)
        )
        + f"items: [{', '.join(['*l6'] * 10)}]\n"
    ),
    "self-referencing List": "&x {apiVersion: v1, kind: List, items: [*x]}\n",
    "self-referencing mapping": "&x {services: {a: *x}}\n",
    "deep nesting": "[" * 200_000 + "]" * 200_000 + "\n",
    "a bomb inside a ConfigMap string": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  config.yaml: |\n"
        + "".join(f"    {line}\n" for line in laughs('"lol"').splitlines())
    ),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_within_time_and_memory(tmp_path: Path, name: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[name], encoding="utf-8")
    code, output, seconds = run_limited(str(path))
    assert "Traceback" not in output and "MemoryError" not in output, output
    assert seconds < TIME_LIMIT_S / 2
    if name == "a bomb inside a ConfigMap string":
        # not a time-slicing config: the ConfigMap is read and nothing uses a GPU
        assert code == 0, output
        return
    assert code == 2, output
    assert output.startswith("error: ") and output.count("\n") == 1, output
    if name == "deep nesting":  # libyaml's own limit: a parse error with line and column
        assert "line 1, column 1001: not valid YAML (exceeded maximum nesting depth)" in output
    else:
        assert "accepted:" in output and "example:" in output


def test_the_bomb_files_are_small() -> None:
    """What makes them bombs: kilobytes that expand to billions of nodes."""
    sizes = {name: len(text) for name, text in BOMBS.items() if name != "deep nesting"}
    assert max(sizes.values()) < 4096, sizes


def test_a_wide_list_and_deep_lists_are_bounded(tmp_path: Path) -> None:
    pod = "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}"
    wide = tmp_path / "wide.yaml"
    wide.write_text(
        "apiVersion: v1\nkind: List\nitems:\n" + f"- {pod}\n" * 10_001, encoding="utf-8"
    )
    code, output, _ = run_limited(str(wide))
    assert code == 2 and "accepted: at most 10,000 objects per file" in output, output
    deep = tmp_path / "deep.yaml"
    text = pod
    for _ in range(9):
        text = f"{{apiVersion: v1, kind: List, items: [{text}]}}"
    deep.write_text(text + "\n", encoding="utf-8")
    code, output, _ = run_limited(str(deep))
    assert code == 2 and "a kind: List nested 9 deep: accepted: at most 8" in output, output


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_not_read(special: str) -> None:
    code, output, seconds = run_limited(special)
    assert code == 5 and seconds < 10, output
    assert f"{special}: cannot be read (not a regular file or a pipe" in output


def test_a_pipe_is_read_up_to_the_cap(tmp_path: Path) -> None:
    """`helm template … | ./kit plan /dev/stdin` works; an endless pipe stops at 8 MiB."""
    compose = "services: {a: {image: x, environment: {TF_GPU_MEM_LIMIT: 4096}, gpus: all}}\n"
    command = [
        sys.executable,
        str(ROOT / "build.py"),
        "plan",
        "/dev/stdin",
        "--gpu-memory",
        "16GiB",
        "--gpu-count",
        "2",
    ]
    done = subprocess.run(
        command,
        input=compose,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with subprocess.Popen(["yes", "# lol"], stdout=subprocess.PIPE) as endless:
        done = subprocess.run(
            command,
            stdin=endless.stdout,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            preexec_fn=_limit_memory,
        )
        endless.kill()
    assert done.returncode == 5, done.stdout + done.stderr
    assert "/dev/stdin: cannot be read (larger than 8 MiB" in done.stderr


def test_a_fifo_without_a_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # nobody writes: it reads as empty, at once
    code, output, seconds = run_limited(str(fifo))
    assert code == 2 and seconds < 10, output
    assert "neither a compose file" in output

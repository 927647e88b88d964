"""`tfgpu run -- CMD…`: validate, preflight, summarise, then become the command.

No TensorFlow import (start-up time). The command gets the environment plus the native
variables the settings translate to (TF_FORCE_GPU_ALLOW_GROWTH), which also reach
non-Python TensorFlow programs; Python processes get the rest through the hook.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os
import sys

from tfgpu import is_disabled
from tfgpu.contract.errors import ConfigError, GpuUnavailableError, HookMissingError, printable
from tfgpu.contract.settings import parse_environment
from tfgpu.machine.command_path import candidates, exec_command, python_command, unwrap, which

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple

    from tfgpu.commands.exit_watch import ExitWatch
    from tfgpu.contract.settings import Settings

# Set for the command so the hook in its Python processes does not repeat our warnings.
PREFLIGHT_MARK = "TFGPU_RUN_PREFLIGHT"
DERIVED_MARK = "TFGPU_DERIVED"  # read by settings.parse_environment


def _say(line: str) -> None:
    sys.stderr.write(f"tfgpu: {line}\n")


def prepare(environ: "Mapping[str, str]") -> "Dict[str, str]":
    """Everything before exec: returns the command's environment, or raises TfgpuError."""
    return prepare_run(environ)[0]


def prepare_run(environ: "Mapping[str, str]") -> "Tuple[Dict[str, str], Optional[Settings]]":
    """prepare(), and the settings it read (None with the kit off)."""
    env = dict(environ)
    if is_disabled(env):
        return env, None
    settings = parse_environment(env)
    _home(env, settings.quiet)
    # Only with the kit on: TF_GPU_CONFIG=off pays none of these ~9 ms (-X importtime; preflight 7)
    from tfgpu.commands.summary import describe_gpus, describe_plan
    from tfgpu.plan.preflight import run_preflight

    try:
        pf = run_preflight(settings, env, build_info=_build_info)
    except GpuUnavailableError as e:
        for problem in getattr(e, "problems", []):
            _say(str(problem))
        raise
    if not settings.quiet or pf.problems:
        gpus = describe_gpus(pf.nvml, pf.gpus)
        if gpus:
            _say(gpus)
        _say(describe_plan(pf.plan.as_json(), settings))
        for note in pf.notes:  # PTX JIT, and where the compiled kernels are kept
            _say(note)
    for problem in pf.problems:
        _say(str(problem))
    # Variables tfgpu adds (not ones the user set) are listed, so that `tfgpu show` in the command's
    # processes reports them as derived rather than as the user's own environment.
    added = sorted(name for name in pf.plan.env if name not in env)
    env.update(pf.plan.env)
    if settings.legacy_keras:
        import importlib.util  # only with TF_USE_LEGACY_KERAS on

        if importlib.util.find_spec("tf_keras") is None:
            _say(
                "warning: TF_USE_LEGACY_KERAS asks for tf-keras (Keras 2), which is not installed: "
                "tf.keras will fail to load; pip install tf-keras==X.Y.* (this TensorFlow's "
                "minor) in the image, or unset TF_USE_LEGACY_KERAS for Keras 3"
            )
    cluster = settings.tf_config
    if cluster is not None:
        if not settings.quiet:
            _say(f"cluster: {cluster.explain()}")
        if cluster.built:  # the user's own TF_CONFIG is never replaced (tfgpu.contract.tf_config)
            env["TF_CONFIG"] = cluster.value
            added = sorted({*added, "TF_CONFIG"})
    if (
        settings.hide_gpus
    ):  # a parameter server without TF_GPU_PS_GPUS=true (tfgpu.contract.settings)
        env["CUDA_VISIBLE_DEVICES"] = ""
        added = sorted({*added, "CUDA_VISIBLE_DEVICES"})
    if added:
        env[DERIVED_MARK] = ",".join(added)
    env[PREFLIGHT_MARK] = "1"
    return env, settings


def _build_info() -> "Optional[Dict[str, object]]":
    """The installed TensorFlow's build facts (tfgpu.machine.tfbuild), which preflight asks for only
    with TF_GPU_REQUIRED=true and a GPU in sight (is it a CUDA build?)."""
    from tfgpu.machine import tfbuild  # ~0.13 ms (-X importtime) that every other run need not pay

    return tfbuild.build_info()


def _home(env: "Dict[str, str]", quiet: bool) -> None:
    """HOME not writable (read-only root, an arbitrary uid): one under /tmp (tfgpu.machine.home)."""
    if os.access(env.get("HOME") or "/", os.W_OK | os.X_OK):  # the usual case: no import
        return
    from tfgpu.machine import home  # only for a HOME that is not writable: ~0.9 ms (-X importtime)

    path = home.writable_home(env)
    current = env.get("HOME", "")
    if path is None:
        places = " nor ".join(home.candidates(env))
        _say(
            f"warning: HOME={current!r} is not writable, nor is {places}; programs that write "
            "there (Jupyter, IPython, Keras) may fail. Mount a volume at HOME, or a tmpfs "
            "that this uid can write: docker run --tmpfs /tmp:mode=1777 …"
        )
        return
    if not quiet:
        _say(f"HOME={current!r} is not writable; the command gets HOME={path}")
    env["HOME"] = path


def check_interpreter(command: "List[str]", env: "Mapping[str, str]") -> None:
    """Refuse a command whose Python imports TensorFlow without the hook
    (tfgpu.machine.interpreter), also through exec wrappers (`env`, `timeout`, `nice`…): raises
    HookMissingError, unless TF_GPU_REQUIRE_HOOK=false (validated at the door with the other
    settings). Costs nothing for a command that is not Python, nor for the image's own Python with
    its site (the hook is known to load there); one probe of the interpreter (~20 ms) for another
    Python, bounded, never reading the command's stdin, and a probe that fails is a refusal, not a
    guess."""
    if is_disabled(env):
        return
    inner, inner_env = unwrap(command, env)
    found_python = python_command(inner, inner_env)
    if found_python is None or not parse_environment(env).require_hook:
        return
    python, program = found_python
    # ~0.2 ms (-X importtime): only a Python command is checked
    from tfgpu.machine import interpreter

    if not interpreter.may_import_tensorflow(program) or interpreter.same_site(python, inner_env):
        return
    try:
        found = interpreter.probe(python, inner_env)
    except interpreter.ProbeFailed as e:
        raise HookMissingError(interpreter.unknown(python, str(e))) from None
    if found.unhooked_tensorflow:
        raise HookMissingError(interpreter.refusal(python, found))


def default_shell(env: "Mapping[str, str]") -> str:
    return "bash" if which("bash", env) else "sh"


def run(command: "List[str]", environ: "Optional[Mapping[str, str]]" = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        env, settings = prepare_run(environ)
    except (ConfigError, GpuUnavailableError) as e:
        _say(f"error: {e}")
        _say("nothing was started")
        return e.exit_code
    if not command:
        # Docker appends CMD to ENTRYPOINT; an empty CMD means "give me a shell".
        command = [default_shell(env)]
        if not is_disabled(env):
            _say(f"no command given; starting an interactive shell ({command[0]})")
    if which(command[0], env) is None and not any(
        os.path.isfile(p) for p in candidates(command[0], env)
    ):  # a file that exists but cannot run is exec's error below (126), as in a shell
        _say(f"error: command not found: {printable(command[0])}")
        return 127
    try:
        check_interpreter(command, env)
    except (ConfigError, HookMissingError) as e:
        _say(f"error: {e}")
        _say("nothing was started")
        return e.exit_code
    watch = _exit_watch(command, env, settings)
    if os.getpid() == 1 or watch is not None:
        # only as PID 1: ~1.1 ms (-X importtime)
        from tfgpu.commands.pid1 import exit_as_init, run_as_init

        code = run_as_init(command, env, watch)
        if code == 0 and settings is not None:
            _tell_servers(settings)
        return exit_as_init(code)
    try:
        exec_command(command, env)
    except OSError as e:
        _say(f"error: cannot run {printable(command[0])}: {e.strerror}")
        return 127 if isinstance(e, FileNotFoundError) else 126


def _exit_watch(
    command: "List[str]", env: "Mapping[str, str]", settings: "Optional[Settings]"
) -> "Optional[ExitWatch]":
    """The exit grace (tfgpu.commands.exit_watch) for a Python command: always as PID 1 (a
    container's entrypoint), and for a task of a training cluster wherever it runs; None when
    TF_GPU_EXIT_GRACE=off or the command is no Python. Without PID 1 and a cluster the command
    is exec'd as before, keeping its PID."""
    if settings is None or settings.exit_grace is None:
        return None
    if os.getpid() != 1 and settings.tf_config is None:
        return None
    inner, inner_env = unwrap(command, env)
    if python_command(inner, inner_env) is None:
        return None
    # only for a watched command: ~1.7 ms (-X importtime)
    from tfgpu.commands.exit_watch import ExitWatch

    return ExitWatch(settings.exit_grace)


def _tell_servers(settings: "Settings") -> None:
    """A chief whose program completed: its servers end too (tfgpu.commands.chief_done)."""
    cfg = settings.tf_config
    if cfg is None or cfg.task_type != "chief" or "ps" not in cfg.cluster:
        return
    from tfgpu.commands import chief_done  # only at a chief's end: ~0.9 ms (-X importtime)

    servers = sum(len(cfg.cluster.get(role, [])) for role in ("worker", "ps"))
    chief_done.announce(cfg.port, servers)

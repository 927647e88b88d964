"""The environment `build.py k8s` writes into its pods, checked as the runtime will check it.

Four contract variables have a flag of their own (--mem-limit, --virtual-devices,
--memory-growth, --metrics-port); each may come from its flag or from `--env NAME=VALUE`, never
from both (an error naming both: two env entries would leave the pod's value to Kubernetes'
last-wins merge and the manifest's annotations to the flag). Whatever the source, the value
drives everything that depends on it: `--env TF_GPU_METRICS_PORT=9999` moves the containerPort,
the scrape annotations and the PodMonitor too. The whole environment is then parsed by the
runtime's own `tfgpu.contract.settings.parse_environment`, so a manifest `k8s` writes is one the
image's `tfgpu run` accepts, and a list of caps must fit the pod's GPU count as
`tfgpu.plan.device_plan` requires."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from tfgpu.contract.errors import ConfigError, printable, shown
from tfgpu.contract.names import strangers
from tfgpu.contract.settings import (
    EXAMPLE_METRICS_PORT,
    Settings,
    parse_bool,
    parse_environment,
    parse_mem_limit,
    parse_metrics_port,
    parse_virtual_devices,
)
from tfgpu.contract.tf_config import PS_GPUS

from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.name_rules import ENV_NAME, refuse_control

_log = logging.getLogger(__name__)

# variable -> (its flag, the runtime's parser of it (value, variable), an example value)
FLAGGED: dict[str, tuple[str, Callable[[str, str], object], str]] = {
    "TF_GPU_MEM_LIMIT": ("--mem-limit", parse_mem_limit, "6GiB"),
    "TF_GPU_VIRTUAL_DEVICES": ("--virtual-devices", parse_virtual_devices, "2048,2048"),
    "TF_GPU_MEMORY_GROWTH": (
        "--memory-growth",
        lambda value, variable: parse_bool(variable, value),
        "true",
    ),
    "TF_GPU_METRICS_PORT": ("--metrics-port", parse_metrics_port, str(EXAMPLE_METRICS_PORT)),
}


@dataclass(frozen=True)
class PodEnv:
    env: list[tuple[str, str]]  # in the manifest's order
    metrics_port: int | None  # None: no metrics server (0)
    capped: bool  # the runtime will cap each GPU (TF_GPU_MEM_LIMIT or TF_GPU_VIRTUAL_DEVICES)
    # the recovery rule's action (TF_GPU_RECOVER_*, tfgpu.contract.recovery_rule): "report" wants a
    # liveness probe on the metrics port's /livez, "exit" the pod's restart; None: no rule
    recovery: str | None = None


def pod_env(flagged: dict[str, str | None], extra: list[str], gpus: int) -> PodEnv:
    """`flagged`: variable -> its flag's value (None: flag not given); `extra`: the --env items.
    UsageError names the flag (or `--env NAME`) of the first bad value."""
    given = _extra(extra)
    values: dict[str, str] = {}
    source: dict[str, str] = {}
    for variable, (flag, check, example) in FLAGGED.items():
        from_flag, from_env = flagged.get(variable), given.pop(variable, None)
        if from_flag is not None and from_env is not None:
            raise UsageError(
                f"{flag} {from_flag!r} and --env {variable}={from_env!r} set the same variable: "
                f"accepted: one of them; example: {flag} {from_flag}"
            )
        value = from_flag if from_flag is not None else from_env
        if value is None:
            continue
        label = flag if from_flag is not None else f"--env {variable}"
        if not value.strip():  # the runtime would read it as unset: say so, write nothing
            raise UsageError(
                f"{label} is empty: accepted: a value, or leaving it out; example: "
                + _given(label, example)
            )
        try:  # also when TF_GPU_CONFIG=off would skip it
            check(value, variable)
        except ConfigError as error:
            raise _refusal(label, error) from None
        values[variable], source[variable] = value, label
    if "TF_GPU_MEM_LIMIT" in values and "TF_GPU_VIRTUAL_DEVICES" in values:
        raise UsageError(
            f"{source['TF_GPU_MEM_LIMIT']} and {source['TF_GPU_VIRTUAL_DEVICES']} exclude each "
            "other: one cap per GPU, or the sizes of its split; example: --virtual-devices "
            "2048,2048"
        )
    port_text = values.setdefault("TF_GPU_METRICS_PORT", str(EXAMPLE_METRICS_PORT))
    source.setdefault("TF_GPU_METRICS_PORT", "--metrics-port")
    metrics_port = parse_metrics_port(port_text)
    if metrics_port is None:
        del values["TF_GPU_METRICS_PORT"]  # off: the variable is simply not set
    env = [*values.items(), *given.items()]
    settings = _runtime_accepts(env, source, gpus)
    capped = settings.enabled and settings.asks_for_gpu_config
    recovery = settings.recovery.action if settings.enabled and settings.recovery else None
    return PodEnv(env, metrics_port, capped, recovery)


def _extra(items: list[str]) -> dict[str, str]:
    """The --env items by name; a name given twice is an error (Kubernetes keeps the last)."""
    given: dict[str, str] = {}
    for item in items:
        refuse_control("--env", item, "TF_GPU_QUIET=true")
        name, sep, value = item.partition("=")
        if not sep or not ENV_NAME.fullmatch(name):
            raise UsageError(
                f"--env {item!r} is not valid: accepted: NAME=VALUE with a NAME of letters, "
                "digits and '_' not starting with a digit; example: --env TF_GPU_QUIET=true"
            )
        if name in given:
            raise UsageError(
                f"--env {name} is given twice ({given[name]!r} and {value!r}): accepted: each "
                f"variable once; example: --env {name}={value}"
            )
        given[name] = value
    return given


def _given(label: str, text: str) -> str:
    """`--flag TEXT`, or `--env NAME=TEXT` for a label `--env NAME`."""
    return f"{label}={text}" if label.startswith("--env ") else f"{label} {text}"


def _refusal(label: str, error: ConfigError) -> UsageError:
    why = f" ({error.why})" if error.why else ""
    return UsageError(
        f"{_given(label, repr(error.value))} is not valid{why}: accepted: {error.accepted}; "
        f"example: {_given(label, error.example)}"
    )


def _runtime_accepts(env: list[tuple[str, str]], source: dict[str, str], gpus: int) -> Settings:
    """Parse the pod's whole environment as `tfgpu run` will, and check its lists against the
    pod's GPU count; the settings the runtime will have."""
    # TF_GPU_PS_GPUS needs TF_GPU_PS, which --ps sets: its value is read here, the whole with the
    # workers' variables (workers.py), and without --ps it is refused there
    own = {name: value for name, value in env if name != PS_GPUS}
    try:
        if PS_GPUS in dict(env):
            parse_bool(PS_GPUS, dict(env)[PS_GPUS])
        settings = parse_environment(own)
    except ConfigError as error:
        raise _refusal(source.get(error.variable, f"--env {error.variable}"), error) from None
    _check_names(dict(env))
    if not settings.enabled:
        return settings
    if settings.required and settings.visible_devices == []:
        # tfgpu.plan.preflight: exit 69 at start, in every GPU pod, whatever the node has
        raise UsageError(
            f"--env TF_GPU_REQUIRED={shown(dict(env)['TF_GPU_REQUIRED'])} and --env "
            f"CUDA_VISIBLE_DEVICES={shown(dict(env)['CUDA_VISIBLE_DEVICES'])}: the GPU pods "
            "would exit 69 at start (a GPU required, every GPU hidden); accepted: one of them; "
            "example: --env TF_GPU_REQUIRED=true"
        )
    # tfgpu.plan.device_plan: one value for every GPU, or exactly one per visible GPU
    for variable, parsed in (
        ("TF_GPU_MEM_LIMIT", settings.mem_limit),
        ("TF_GPU_VIRTUAL_DEVICES", settings.virtual_devices),
    ):
        if parsed is not None and len(parsed) not in (1, gpus):
            label, value = source.get(variable, f"--env {variable}"), dict(env)[variable]
            raise UsageError(
                f"{_given(label, repr(value))} is not valid ({len(parsed)} values for --gpus "
                f"{gpus}): accepted: one value for every GPU of the pod, or exactly one per GPU "
                f"({gpus}); example: {_given(label, FLAGGED[variable][2])}"
            )
    return settings


def _check_names(env: dict[str, str]) -> None:
    """A name of the kit's prefixes that the runtime does not know (tfgpu.contract.names): refused
    when it is likely a typo of a known one (`TF_GPU_MEM_LMIT`, `tf_gpu_mem_limit`), as `plan`
    refuses it in the manifest; a warning when no known name is close."""
    for stranger in strangers(env):
        if stranger.closest is None:
            _log.warning("--env %s: %s", printable(stranger.name), stranger.warning())
            continue
        raise UsageError(
            f"--env {printable(stranger.name)}={shown(stranger.value)} is not valid "
            f"({printable(stranger.why())}): accepted: a variable the kit or TensorFlow reads "
            f"(docs/runtime.md lists the kit's); example: --env "
            f"{stranger.closest}={printable(stranger.value)[:40]}"
        )

"""Multi-worker training: the `TF_CONFIG` of `tf.distribute.MultiWorkerMirroredStrategy`, built
from the pod's own environment, or the user's own one validated. Pure parsing, stdlib only
(imported by tfgpu.contract.settings; the hook and `tfgpu run` set the variable).

    TF_GPU_WORKERS=3                     on: 3 workers train one model together
    TF_GPU_WORKER_HOSTS=train-{index}.train-workers
                                         each worker's host: a pattern with `{index}`, or a
                                         comma-separated list of the hosts in index order
    TF_GPU_WORKER_INDEX=1                this worker's index; default JOB_COMPLETION_INDEX, which
                                         an Indexed Job (and a JobSet's indexed Job) sets in
                                         each pod
    TF_GPU_WORKER_PORT=2222              the port every worker's gRPC server listens on

Parameter-server training (tf.distribute.ParameterServerStrategy): a chief, TF_GPU_WORKERS
workers and TF_GPU_PS parameter servers, every task listening on TF_GPU_WORKER_PORT:

    TF_GPU_PS=1                          on: roles chief, worker and ps (unset: the workers only)
    TF_GPU_PS_HOSTS=train-ps-{index}.train
                                         the parameter servers' hosts, as TF_GPU_WORKER_HOSTS
    TF_GPU_CHIEF_HOST=train-chief-0.train
                                         the chief's host (one name, no {index})
    TF_GPU_ROLE=ps                       this pod's role: chief, worker or ps (required with
                                         TF_GPU_PS; without it only worker); the index within
                                         the role is TF_GPU_WORKER_INDEX / JOB_COMPLETION_INDEX
                                         (the chief's is 0)
    TF_GPU_PS_GPUS=true                  a parameter server sees the pod's GPUs (default false:
                                         `tfgpu run` gives it CUDA_VISIBLE_DEVICES="", since its
                                         variables live in host memory; tfgpu.contract.settings)

Off unless TF_GPU_WORKERS is set. A TF_CONFIG set by the user is never replaced: it is checked
(JSON, a cluster of "host:port" lists, a task inside it) and reported instead. One that `tfgpu
run` built (listed in TFGPU_DERIVED) is rebuilt from the variables, which it came from.

Keras: TensorFlow >= 2.16 gives Keras 3 as `tf.keras`, whose `model.fit` fails under
MultiWorkerMirroredStrategy (keras-team/keras#20585); TF_USE_LEGACY_KERAS=1 gives tf-keras
(Keras 2) instead. TensorFlow compares the exact text, and anything but "true", "True" or "1"
is off, silently: `_os.environ.get("TF_USE_LEGACY_KERAS", None) in ("true", "True", "1")`
(tensorflow/tensorflow 1fac14e15266f3e0734ca59215393a388b3cf9cd, tensorflow/
api_template.__init__.py; the same test in tensorflow/python/util/lazy_loader.py,
KerasLazyLoader). So " 1" or "1 " is Keras 3 there, and is refused here (never reported as
tf-keras), as is any value outside both lists. TF_FORCE_GPU_ALLOW_GROWTH is judged by the same
principle (tfgpu.contract.settings): the exact text TensorFlow compares.

The cluster's grammar is one: TF_CONFIG's addresses are judged as TF_GPU_WORKER_HOSTS and
TF_GPU_WORKER_PORT are (RFC 1123 host names in ASCII, ports 1-65535), an address listed twice
is refused, and each wrong type is named as what it is ("task.index must be an integer").
"""

from __future__ import annotations

import re

from tfgpu.contract.ascii_numbers import whole_number
from tfgpu.contract.errors import ConfigError, printable

TYPE_CHECKING = False  # not `from typing import …`: tfgpu run imports this at start-up
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

WORKERS = "TF_GPU_WORKERS"
HOSTS = "TF_GPU_WORKER_HOSTS"
INDEX = "TF_GPU_WORKER_INDEX"
PORT = "TF_GPU_WORKER_PORT"
PS = "TF_GPU_PS"
PS_HOSTS = "TF_GPU_PS_HOSTS"
CHIEF_HOST = "TF_GPU_CHIEF_HOST"
ROLE = "TF_GPU_ROLE"
PS_GPUS = "TF_GPU_PS_GPUS"
VARIABLES = (WORKERS, HOSTS, INDEX, PORT, PS, PS_HOSTS, CHIEF_HOST, ROLE, PS_GPUS)
ROLES = ("chief", "worker", "ps")  # TF_GPU_ROLE with TF_GPU_PS (ParameterServerStrategy's)
TF_CONFIG = "TF_CONFIG"
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
JOB_INDEX = "JOB_COMPLETION_INDEX"  # set by Kubernetes in every pod of an Indexed Job
PLACEHOLDER = "{index}"
DEFAULT_PORT = 2222  # the port TensorFlow's own distributed examples use
# One bound for the door and `build.py k8s --workers` (tfgpu_kit.k8s.workers): far above any one
# collective's size. The TF_CONFIG the kit builds is bounded too (MAX_TF_CONFIG_BYTES).
MAX_WORKERS = 1000
# Linux refuses an exec whose any one environment string is over 128 KiB (MAX_ARG_STRLEN: E2BIG,
# "Argument list too long"): 10000 workers made a 239 kB TF_CONFIG and every later subprocess
# failed. Half of that leaves room for the rest of the environment.
MAX_TF_CONFIG_BYTES = 64 * 1024

_LEGACY_ON = ("true", "True", "1")  # exactly TensorFlow's list (module doc)
_LEGACY_OFF = ("false", "False", "0")
LEGACY_ACCEPTED = "1, true or True (tf-keras, Keras 2) or 0, false or False (Keras 3)"
# RFC 1123 host names as Kubernetes and Docker write them: labels of letters, digits and '-',
# not starting or ending with '-', at most 63 characters; at most 253 in all.
_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.ASCII | re.IGNORECASE)
HOSTS_ACCEPTED = (
    "a host name pattern with {index} (replaced by 0 … N-1), or the N host names in index "
    "order separated by ','; host names of letters, digits, '-' and '.'"
)
HOSTS_EXAMPLE = "train-{index}.train-workers"
PS_HOSTS_EXAMPLE = "train-ps-{index}.train"
CHIEF_HOST_EXAMPLE = "train-chief-0.train"
TF_CONFIG_ACCEPTED = (
    'JSON: {"cluster": {"worker": ["host:port", …]}, "task": {"type": "worker", "index": N}} '
    "with the task's type in the cluster and its index in that list"
)
TF_CONFIG_EXAMPLE = (
    '{"cluster":{"worker":["w0:2222","w1:2222"]},"task":{"type":"worker","index":0}}'
)


class TfConfig:
    """The TF_CONFIG this process gets: `value` (JSON text), `built` (by the kit, from the
    variables; False: the user's own), and what it says."""

    def __init__(
        self,
        value: str,
        built: bool,
        task_type: str,
        index: int,
        cluster: Dict[str, List[str]],
        index_from: str = "",
    ) -> None:
        self.value = value
        self.built = built
        self.task_type = task_type
        self.index = index
        self.cluster = cluster
        self.index_from = index_from  # the variable the index came from (built only)

    @property
    def workers(self) -> int:
        return len(self.cluster.get("worker", []))

    @property
    def address(self) -> str:
        return self.cluster[self.task_type][self.index]

    @property
    def port(self) -> int:
        """This task's own port (its address is validated: host:port)."""
        return int(self.address.rpartition(":")[2])

    @property
    def peers(self) -> List[str]:
        return [a for role in self.cluster.values() for a in role if a != self.address]

    def explain(self) -> str:
        """One line for `tfgpu show` and `tfgpu run`."""
        whose = "built by the kit" if self.built else "your TF_CONFIG, validated"
        size = ", ".join(f"{len(v)} {printable(k)}" for k, v in self.cluster.items())
        peers = ", ".join(self.peers) or "none"
        role = printable(self.task_type)
        return f"{role} {self.index} of {size} at {self.address} ({whose}); peers: {peers}"


def parse_legacy_keras(value: str) -> bool:
    """TensorFlow's verdict on the exact text (module doc); a value it would read as off
    although it looks like on (" 1", "TRUE", "yes") is refused."""
    if value in _LEGACY_ON:
        return True
    if value in _LEGACY_OFF:
        return False
    why = "TensorFlow would silently read it as off and give Keras 3"
    if value.strip() in _LEGACY_ON + _LEGACY_OFF:
        why += ": it compares the exact text, spaces included"
    raise ConfigError(LEGACY_KERAS, value, LEGACY_ACCEPTED + ", exactly", "1", why=why)


def parse_workers(value: str) -> int:
    count = whole_number(value.strip(), MAX_WORKERS)
    if count is None or count < 1:
        raise ConfigError(WORKERS, value, f"a whole number of workers from 1 to {MAX_WORKERS}", "2")
    return count


def parse_port(value: str, variable: str = PORT) -> int:
    port = whole_number(value.strip(), 65535)
    if port is None or port < 1:
        raise ConfigError(variable, value, "a TCP port from 1 to 65535", str(DEFAULT_PORT))
    return port


def parse_index(
    variable: str, value: str, workers: int, role: str = "worker", count_from: str = WORKERS
) -> int:
    """The task's index within its role (`workers` tasks of it, counted by `count_from`)."""
    text = value.strip()
    accepted = f"a {role} index from 0 to {workers - 1} ({count_from}={workers})"
    if not (text.isascii() and text.isdigit()):
        raise ConfigError(variable, value, accepted, "0")
    index = whole_number(text, workers - 1)
    if index is None:
        noun = "workers" if role == "worker" else f"{role} tasks"
        raise ConfigError(variable, value, accepted, "0", why=f"only {workers} {noun}")
    return index


def parse_ps(value: str) -> int:
    count = whole_number(value.strip(), MAX_WORKERS)
    if count is None or count < 1:
        raise ConfigError(
            PS, value, f"a whole number of parameter servers from 1 to {MAX_WORKERS}", "1"
        )
    return count


def parse_role(value: str) -> str:
    role = value.strip()
    if role not in ROLES:
        raise ConfigError(
            ROLE,
            value,
            f"this pod's role with {PS}: {', '.join(ROLES)} (lower case)",
            "worker",
        )
    return role


def parse_chief_host(value: str) -> str:
    host = value.strip()
    if not _valid_host(host):
        raise ConfigError(
            CHIEF_HOST,
            value,
            "the chief's one host name: letters, digits, '-' and '.' (no {index}, no list)",
            CHIEF_HOST_EXAMPLE,
        )
    return host


def _valid_host(host: str) -> bool:
    return len(host) <= 253 and all(_LABEL.fullmatch(label) for label in host.split("."))


def parse_hosts(
    value: str,
    workers: int,
    variable: str = HOSTS,
    count_from: str = WORKERS,
    example: str = HOSTS_EXAMPLE,
) -> List[str]:
    """The workers' (or, `variable`=TF_GPU_PS_HOSTS, the parameter servers') host names, in
    index order: a pattern expanded, or a list of exactly `workers` names."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(variable, value, HOSTS_ACCEPTED, example, why=why)

    text = value.strip()
    if PLACEHOLDER not in text and ("{" in text or "}" in text):
        raise refuse(f"the pattern's placeholder is {PLACEHOLDER}, written exactly so")
    if PLACEHOLDER in text:
        if text.count(PLACEHOLDER) != 1 or "," in text:
            raise refuse("one {index} in one pattern")
        hosts = [text.replace(PLACEHOLDER, str(i)) for i in range(workers)]
    else:
        hosts = [h.strip() for h in text.split(",")]
        if len(hosts) != workers:
            raise refuse(f"{len(hosts)} host(s) for {count_from}={workers}")
    for host in hosts:
        if not _valid_host(host):
            raise refuse(f"{host!r} is not a host name")
    if len(set(h.lower() for h in hosts)) != len(hosts):
        raise refuse("a host is listed twice")
    return hosts


def build(
    workers: int,
    hosts: List[str],
    index: int,
    port: int,
    index_from: str,
    roles: Optional[Dict[str, List[str]]] = None,
    task_type: str = "worker",
) -> TfConfig:
    """The kit's TF_CONFIG: the workers, or every role of `roles` (host names in index order)."""
    import json  # only for multi-worker: `tfgpu run` start-up does not pay it otherwise

    every = {**(roles or {}), "worker": hosts}
    order = [role for role in ROLES if role in every]  # chief, worker, ps: as `show` lists them
    cluster: Dict[str, List[str]] = {role: [f"{h}:{port}" for h in every[role]] for role in order}
    doc = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    value = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    if len(value.encode()) > MAX_TF_CONFIG_BYTES:
        raise ConfigError(
            WORKERS,
            str(workers),
            f"workers whose TF_CONFIG (every task's host:port) fits in "
            f"{MAX_TF_CONFIG_BYTES // 1024} KiB: fewer workers or shorter host names",
            "2",
            why=f"their TF_CONFIG would be {len(value.encode())} bytes: Linux refuses to start "
            "a program whose environment holds one string over 128 KiB (E2BIG)",
        )
    return TfConfig(value, True, task_type, index, cluster, index_from)


def _kind(item: object) -> str:
    """What a JSON value is, in words: never its repr(), which could be megabytes deep."""
    if isinstance(item, bool):
        return "true/false"
    if isinstance(item, (int, float)):
        return "a number"
    if isinstance(item, str):
        return "a string"
    if isinstance(item, list):
        return "a list"
    return "null" if item is None else "an object"


def _valid_address(address: str) -> bool:
    """`host:port` as TF_GPU_WORKER_HOSTS and TF_GPU_WORKER_PORT judge them (or `[IPv6]:port`)."""
    host, sep, port = address.rpartition(":")
    if not sep or whole_number(port, 65535) in (None, 0):
        return False
    if host.startswith("[") and host.endswith("]"):
        import ipaddress

        try:
            return ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            return False
    return _valid_host(host)


def _job_name(role: str) -> bool:
    """A job name as TensorFlow's device names take it (tensorflow/tensorflow
    xla/tsl/util/device_name_utils.cc, DeviceNameUtils::ParseFullName: a letter, then letters,
    digits and '_', ASCII; `worker-1` or `1w` abort TensorFlow 2.21's server): without `re`."""
    return (
        role[:1].isascii()
        and role[:1].isalpha()
        and all(c.isascii() and (c.isalnum() or c == "_") for c in role)
    )


def parse_user_tf_config(value: str) -> TfConfig:
    """A TF_CONFIG the user set: TensorFlow's TFConfigClusterResolver would fail late (or, with an
    index outside its cluster, wait for a worker that never comes); this refuses it at the door.
    Every part of the message that comes from the value is escaped
    (tfgpu.contract.errors.printable)."""

    def refuse(why: str) -> ConfigError:
        return ConfigError(TF_CONFIG, value, TF_CONFIG_ACCEPTED, TF_CONFIG_EXAMPLE, why=why)

    import json  # only when TF_CONFIG is set

    try:
        doc: Any = json.loads(value)
    except RecursionError:  # json's C scanner recurses once per level of nesting
        raise refuse("nested too deeply") from None
    except ValueError as e:
        raise refuse(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise refuse(f"not a JSON object but {_kind(doc)}")
    cluster, task = doc.get("cluster"), doc.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise refuse("no 'cluster' object")
    seen: Dict[str, str] = {}
    for role, addresses in cluster.items():
        where = f"cluster.{printable(role)}"
        if not _job_name(role):
            raise refuse(
                f"{where[:120]}: a role name TensorFlow aborts on (a job name is "
                "[A-Za-z][A-Za-z0-9_]*, ASCII: its device names are parsed so, and the server "
                "dies with 'Check failed: DeviceNameUtils::ParseFullName'); use one such as "
                "worker, chief, ps or evaluator"
            )
        if not isinstance(addresses, list) or not addresses:
            raise refuse(f"{where} is not a non-empty list but {_kind(addresses)}")
        for address in addresses:
            if not isinstance(address, str):
                raise refuse(f"{where} holds {_kind(address)}, not a 'host:port' string")
            if not _valid_address(address):
                raise refuse(
                    f"{where} holds {address[:100]!r}, not 'host:port' with a host "
                    "name of ASCII letters, digits, '-' and '.' and a port from 1 to 65535"
                )
            key = address.lower()
            if key in seen:
                raise refuse(f"{address[:100]!r} is listed twice ({seen[key]} and {where})")
            seen[key] = where
    if not isinstance(task, dict):
        raise refuse("no 'task' object")
    task_type, index = task.get("type"), task.get("index", 0)
    if not isinstance(task_type, str):
        raise refuse(f"task.type must be a string (a role of the cluster), not {_kind(task_type)}")
    if task_type not in cluster:
        raise refuse(f"task.type {task_type[:100]!r} is not a role of the cluster")
    if type(index) is not int:  # not bool (True == 1), float (1.0) nor a string ("1")
        raise refuse(f"task.index must be an integer, not {_kind(index)}")
    if not 0 <= index < len(cluster[task_type]):
        raise refuse(
            f"task.index {index} is outside cluster.{printable(task_type)} "
            f"({len(cluster[task_type])} entries)"
        )
    return TfConfig(value, False, task_type, index, cluster)


def _only_with(get: Callable[[str], Optional[str]], names: Tuple[str, ...], switch: str) -> None:
    """Refuse any of `names` set without `switch` (a variable that would do nothing)."""
    for name in names:
        value = get(name)
        if value is not None:
            example = "2" if switch == WORKERS else "1"
            raise ConfigError(
                name,
                value,
                f"only together with {switch}, which turns "
                + ("multi-worker" if switch == WORKERS else "parameter-server")
                + " training on",
                f"{value} (with {switch}={example})",
                why=f"{switch} is not set",
            )


def _task_index(
    get: Callable[[str], Optional[str]],
    environ: Mapping[str, str],
    count: int,
    role: str,
    count_from: str,
) -> Tuple[int, str]:
    """This task's index within its role, and the variable it came from."""
    index_text, index_from = get(INDEX), INDEX
    if index_text is None:
        index_text, index_from = environ.get(JOB_INDEX, "").strip() or None, JOB_INDEX
    if index_text is None:
        raise ConfigError(
            INDEX,
            "",
            f"this {role}'s index; set it, or run in an Indexed Job, which sets {JOB_INDEX}",
            "0",
            why=f"neither it nor {JOB_INDEX} is set",
        )
    return parse_index(index_from, index_text, count, role, count_from), index_from


def parse(
    get: Callable[[str], Optional[str]], environ: Mapping[str, str], derived: bool
) -> Optional[TfConfig]:
    """The TF_CONFIG of this process; None when neither TF_CONFIG nor TF_GPU_WORKERS is set.
    `get` returns a set, non-empty value or None (recording its source); `derived`: TF_CONFIG was
    built by `tfgpu run` from these same variables."""
    user = get(TF_CONFIG)
    if user is not None and not derived:
        return parse_user_tf_config(user)
    ps_text = get(PS)
    if ps_text is None:
        _only_with(get, (PS_HOSTS, CHIEF_HOST, PS_GPUS), PS)
        role_text = get(ROLE)
        if role_text is not None and role_text.strip() != "worker":
            raise ConfigError(
                ROLE,
                role_text,
                f"worker (or unset) without {PS}; chief, worker or ps with {PS} set",
                f"chief (with {PS}=1)",
                why=f"{PS} is not set: every task is a worker",
            )
    workers_text = get(WORKERS)
    if workers_text is None:
        _only_with(get, (HOSTS, INDEX, PORT, ROLE), WORKERS)
        if ps_text is not None:
            raise ConfigError(
                PS,
                ps_text,
                f"together with {WORKERS}, the number of workers, and {HOSTS}",
                f"{ps_text} with {WORKERS}=2",
                why=f"{WORKERS} is not set",
            )
        return None
    workers = parse_workers(workers_text)
    hosts_text = get(HOSTS)
    if hosts_text is None:
        raise ConfigError(
            WORKERS,
            workers_text,
            f"together with {HOSTS}, the workers' host names",
            f"{workers} with {HOSTS}={HOSTS_EXAMPLE}",
            why=f"{HOSTS} is not set",
        )
    hosts = parse_hosts(hosts_text, workers)
    port_text = get(PORT)
    port = parse_port(port_text) if port_text is not None else DEFAULT_PORT
    if ps_text is None:
        index, index_from = _task_index(get, environ, workers, "worker", WORKERS)
        return build(workers, hosts, index, port, index_from)
    return _parse_ps_cluster(get, environ, ps_text, workers, hosts, port)


def _parse_ps_cluster(
    get: Callable[[str], Optional[str]],
    environ: Mapping[str, str],
    ps_text: str,
    workers: int,
    hosts: List[str],
    port: int,
) -> TfConfig:
    """TF_GPU_PS is set: chief, workers and parameter servers (module doc)."""
    ps = parse_ps(ps_text)
    needed = ((PS_HOSTS, PS_HOSTS_EXAMPLE), (CHIEF_HOST, CHIEF_HOST_EXAMPLE), (ROLE, "worker"))
    for name, example in needed:
        if get(name) is None:
            raise ConfigError(
                PS,
                ps_text,
                f"together with {PS_HOSTS}, {CHIEF_HOST} and {ROLE}",
                f"{ps} with {name}={example}",
                why=f"{name} is not set",
            )
    ps_hosts = parse_hosts(str(get(PS_HOSTS)), ps, PS_HOSTS, PS, PS_HOSTS_EXAMPLE)
    chief = parse_chief_host(str(get(CHIEF_HOST)))
    role = parse_role(str(get(ROLE)))
    # one host, one task: two roles on one name would be two gRPC servers on one port
    owner: Dict[str, str] = {}
    for name, listed in ((CHIEF_HOST, [chief]), (HOSTS, hosts), (PS_HOSTS, ps_hosts)):
        for host in listed:
            other = owner.setdefault(host.lower(), name)
            if other != name:
                raise ConfigError(
                    name,
                    str(get(name)),
                    "host names of its own: every task (chief, worker, ps) has its own host",
                    {CHIEF_HOST: CHIEF_HOST_EXAMPLE, PS_HOSTS: PS_HOSTS_EXAMPLE}.get(
                        name, HOSTS_EXAMPLE
                    ),
                    why=f"{host!r} is in {other} too",
                )
    if role == "chief":
        index_text, index_from = get(INDEX), INDEX
        if index_text is None and environ.get(JOB_INDEX, "").strip():
            # the chief's Job has one pod, index 0: another index is a second chief
            index_text, index_from = environ.get(JOB_INDEX, ""), JOB_INDEX
        if index_text is not None and index_text.strip() != "0":
            raise ConfigError(
                index_from,
                index_text,
                "0 for the chief (there is one: its Job has one pod)",
                "0",
                why="a second chief would run the training program again, against the same "
                "workers and parameter servers",
            )
        index, index_from = 0, ROLE
    elif role == "worker":
        index, index_from = _task_index(get, environ, workers, "worker", WORKERS)
    else:
        index, index_from = _task_index(get, environ, ps, "ps", PS)
    roles = {"chief": [chief], "ps": ps_hosts}
    return build(workers, hosts, index, port, index_from, roles, role)

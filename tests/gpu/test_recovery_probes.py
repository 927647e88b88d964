"""The recovery rule's Kubernetes probes against real containers: the Deployment that
`./kit k8s --env TF_GPU_RECOVER_AT=…` renders, its environment given to the kit's image on the
fake GPU, and the kubelet's probe loop (tests/kubelet_probes.py) run with the rendered probes'
own timings, not compressed, each probe an HTTP GET of /livez from inside the container as the
kubelet's from the node.

- a program that sleeps 60 s before it imports TensorFlow (data preparation, a slow node) is
  not restarted, where the liveness probe alone (period 10, threshold 3) restarts it at 20 s,
  as the answers recorded here show (its first probes get no answer);
- a program stuck at its cap is still restarted, by the liveness probe, once /livez says so,
  also one stuck before its first liveness probe (the startup probe is a TCP connect, so a 503
  is left to the liveness probe's three failures, not the startup probe's 10 minutes)."""

from __future__ import annotations

import threading
from typing import Any

import yaml

from tests import kubelet_probes
from tests.gpu.harness import PROBE_MOUNT, GpuHost
from tests.kit_images import build_py

CAP_MIB = 1024
AFTER_S = 4
LATE_S = 60  # the program's preparation before `import tensorflow`
PROGRAM_LATE = (
    f"import runpy, sys, time; time.sleep({LATE_S}); "
    f"sys.argv = ['probe.py', 'serve', '900']; "
    f"runpy.run_path('{PROBE_MOUNT}/probe.py', run_name='__main__')"
)


READ_LIVEZ = """
import urllib.error, urllib.request
try:
    urllib.request.urlopen("http://127.0.0.1:9400/livez", timeout=5)
except urllib.error.HTTPError as e:
    print(e.read().decode())
"""


def _rendered(image: str) -> dict[str, Any]:
    """The serving container of the Deployment `k8s` renders with the recovery rule."""
    done = build_py(
        "k8s",
        "--kind",
        "deployment",
        "--image",
        image,
        "--mem-limit",
        str(CAP_MIB),
        "--metrics-port",
        "9400",
        "--env",
        "TF_GPU_RECOVER_AT=90%",
        "--env",
        f"TF_GPU_RECOVER_AFTER={AFTER_S}s",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [deployment] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def _http_check(container: Any, spec: dict[str, Any]) -> Any:
    """One probe: GET the probe's path on its port inside the container, within its timeout."""
    ports = {port["name"]: port["containerPort"] for port in spec["ports"]}

    def check(probe: kubelet_probes.Probe) -> bool:
        port = ports.get(probe.port, probe.port)
        if probe.path is None:  # tcpSocket: a connection is a success
            attempt = f"socket.create_connection(('127.0.0.1', {port}), timeout={probe.timeout_s})"
        else:
            attempt = (
                f"r = urllib.request.urlopen('http://127.0.0.1:{port}{probe.path}', "
                f"timeout={probe.timeout_s}); sys.exit(0 if 200 <= r.status < 400 else 1)"
            )
        code = (
            "import socket, sys, urllib.request\n"
            "try:\n"
            f"    {attempt}\n"
            "except Exception:\n"
            "    sys.exit(1)\n"
        )
        container.reload()
        if container.status != "running":
            return False
        exit_code, _ = container.exec_run(["python", "-c", code])
        return bool(exit_code == 0)

    return check


def test_rendered_probes_spare_a_late_starter_and_restart_a_stuck_process(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any]
) -> None:
    """Recovery probes: a program importing TensorFlow 60 s late is not restarted; one stuck at
    its cap is"""
    spec = _rendered(runtime_image)
    startup, liveness = kubelet_probes.probes(spec)
    assert startup is not None and liveness is not None
    env = {item["name"]: item["value"] for item in spec["env"]}
    late, _ = gpu_host.start(runtime_image, ["python", "-c", PROGRAM_LATE], env)
    stuck, _ = gpu_host.start(
        runtime_image, ["python", f"{PROBE_MOUNT}/probe.py", "recover", "16", "900"], env
    )
    outcomes: dict[str, kubelet_probes.Outcome] = {}

    def kubelet(name: str, container: Any, until_s: float, enough: Any = None) -> None:
        check = _http_check(container, spec)
        outcomes[name] = kubelet_probes.watch(spec, check, until_s, enough=enough)

    def four_liveness_passes(outcome: kubelet_probes.Outcome) -> bool:
        return sum(kind == "liveness" and ok for _, kind, ok in outcome.answers) >= 4

    # the late one: its start, then four liveness periods (TensorFlow's import on the fake GPU
    # of a loaded 2-core machine takes up to ~60 s more: the bound)
    threads = [
        threading.Thread(
            target=kubelet, args=("late", late, LATE_S + 120 + 4 * 10, four_liveness_passes)
        ),
        threading.Thread(target=kubelet, args=("stuck", stuck, 300)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(400)
    assert set(outcomes) == {"late", "stuck"}, "a probe loop did not finish"

    spared, restarted = outcomes["late"], outcomes["stuck"]
    logs = late.logs().decode(errors="replace")[-3000:]
    assert spared.restarted_at_s is None, (spared.answers, logs)
    kinds = [(kind, passed) for _, kind, passed in spared.answers]
    # nothing answered before the import: under the liveness probe alone, three failures in a
    # row from the start, a restart at 20 s
    assert kinds[:3] == [("startup", False)] * 3, spared.answers
    assert ("startup", True) in kinds and kinds.count(("liveness", True)) >= 3, spared.answers
    assert ("liveness", False) not in kinds, spared.answers

    assert restarted.restarted_at_s is not None, (restarted.answers, stuck.logs()[-3000:])
    kinds = [(kind, passed) for _, kind, passed in restarted.answers]
    # started (the port listens), then restarted by the liveness probe: a process that fills
    # its cap at once is stuck (AFTER_S) before its first liveness probe, and waits for no budget
    assert ("startup", True) in kinds, restarted.answers
    assert kinds[-liveness.failures :] == [("liveness", False)] * liveness.failures
    _, body = stuck.exec_run(["python", "-c", READ_LIVEZ])
    assert body.decode().startswith("stuck: /device:GPU:0 has held"), body
    first_up = next(at for at, kind, passed in spared.answers if passed)
    figures.update(
        startup_budget_s=startup.period_s * startup.failures,
        late_program_first_answer_s=first_up,
        stuck_restarted_at_s=restarted.restarted_at_s,
    )

"""Multi-worker training in real containers of the kit's 2.21 image.

Workers run as `build.py k8s --workers N` makes them (tests/multiworker/group.py): the manifest's
env, the Indexed Job's JOB_COMPLETION_INDEX, the pod DNS names as network aliases, no TF_CONFIG.
TensorFlow runs on the CPU (MultiWorkerMirroredStrategy's gRPC collectives). Proved:

- one cluster: every worker ends with the same weights, which differ from one worker training
  alone; each log names its peers (the kit's `tfgpu: cluster:` line and TensorFlow's spec); each
  worker got the manifest's caps (TF_GPU_MEM_LIMIT in the summary, TF_CPU_VIRTUAL_DEVICES=2
  local logical CPUs), with a custom training loop and with tf.keras `model.fit` (tf-keras);
- without the kit's TF_CONFIG (TF_GPU_CONFIG=off: the same containers) no cluster forms and the
  weights differ, so these tests fail when the kit stops building TF_CONFIG;
- a killed worker: the survivor exits non-zero within SURVIVOR_BOUND_S with the kit's line naming
  the lost peer; the group started again resumes from BackupAndRestore's checkpoint;
- a bad variable: exit 78 before TensorFlow is imported.

CI time (measured on the 2-core development machine): 46 s for the module on a quiet machine,
about 4 minutes while another build loaded it (TensorFlow's import alone took 15-20 s then).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.multiworker.group import Group, Rendered, describe, group, render, run_all, wait_for

pytestmark = pytest.mark.docker

SURVIVOR_BOUND_S = 60.0  # measured: 0.1-14 s (a reset connection, or the heartbeat timeout)
GROUP_TIMEOUT_S = 240.0
CAPS = ["--mem-limit", "2GiB", "--env", "TF_CPU_VIRTUAL_DEVICES=2"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    out = tmp_path_factory.mktemp("k8s")
    return render(out, "--workers", "2", "--checkpoint-claim", "ckpt", *CAPS)


@pytest.fixture
def workers_group(docker_client: docker.DockerClient) -> Iterator[Group]:
    with group(docker_client) as made:
        yield made


def _weights(worker_logs: list[tuple[str, float]]) -> str:
    assert len(worker_logs) == 1, worker_logs
    return worker_logs[0][0]


def _train(g: Group, image: str, rendered: Rendered, **env: str) -> dict[str, list[str]]:
    """Both workers through `loop,fit`; each one's loop and fit weights."""
    workers = g.start(image, rendered, ["loop,fit", "4", "2"], extra_env=env)
    codes = run_all(g, workers, GROUP_TIMEOUT_S)
    assert codes == [0] * len(workers), describe(workers)
    return {
        kind: [_weights(w.marks(f"{kind}-weights")) for w in workers] for kind in ("loop", "fit")
    }


def test_workers_form_one_cluster_with_their_caps(
    workers_group: Group, multiworker_image: str, rendered: Rendered
) -> None:
    t0 = time.monotonic()
    together = _train(workers_group, multiworker_image, rendered)
    for kind in ("loop", "fit"):
        assert len(set(together[kind])) == 1, together  # averaged gradients: the same weights
    for w in workers_group.workers:
        logs, other = w.logs(), rendered.alias(1 - w.index)
        assert (
            f"tfgpu: cluster: worker {w.index} of 2 worker at {rendered.alias(w.index)}:2222"
            in logs
        )
        assert f"peers: {other}:2222" in logs
        ((spec, _),) = w.marks("cluster-formed")
        assert f'"{rendered.alias(0)}:2222", "{rendered.alias(1)}:2222"' in spec
        assert w.marks("local-logical-cpus")[0][0] == "2"  # TF_CPU_VIRTUAL_DEVICES=2 here
        assert "2048 MiB" in logs or "2 GiB" in logs  # the cap, in `tfgpu run`'s summary
        assert w.marks("keras")[0][0].startswith("tf_keras")  # TF_USE_LEGACY_KERAS=1
    # worker 0 alone (a group of one) trains on its own data only: different weights
    workers_group.remove(list(workers_group.workers))
    alone = Rendered(1, {**rendered.env, "TF_GPU_WORKERS": "1"}, *rendered.alias(0).split("-0."))
    single = _train(workers_group, multiworker_image, alone)
    for kind in ("loop", "fit"):
        assert single[kind][0] != together[kind][0], (single, together)
    print(f"multi-worker cluster test: {time.monotonic() - t0:.0f}s")


def test_without_the_kits_tf_config_there_is_no_cluster(
    workers_group: Group, multiworker_image: str, rendered: Rendered
) -> None:
    """The same containers with the kit off: no TF_CONFIG, each worker trains alone; so the
    test above depends on the kit's TF_CONFIG."""
    workers = workers_group.start(
        multiworker_image, rendered, ["loop", "4"], extra_env={"TF_GPU_CONFIG": "off"}
    )
    assert run_all(workers_group, workers, GROUP_TIMEOUT_S) == [0, 0], describe(workers)
    weights = [_weights(w.marks("loop-weights")) for w in workers]
    assert weights[0] != weights[1]
    for w in workers:
        assert w.marks("tf-config")[0][0] == "<unset>"
        assert "tfgpu: cluster:" not in w.logs()


def test_a_lost_worker_stops_the_group_which_resumes_from_its_backup(
    workers_group: Group, multiworker_image: str, rendered: Rendered
) -> None:
    backup = "/checkpoints/backup"
    args = ["fit", "4", "40", "0.2", backup]  # 40 epochs of 4 steps: killed long before the end
    first = workers_group.start(multiworker_image, rendered, args)
    survivor, victim = first
    wait_for(survivor, "epoch 3", GROUP_TIMEOUT_S)  # epochs 0-2 are backed up
    victim.container.kill()
    t_kill = time.monotonic()
    code = survivor.wait(SURVIVOR_BOUND_S)
    took = time.monotonic() - t_kill
    logs = survivor.logs()
    assert code != 0, logs
    assert took < SURVIVOR_BOUND_S
    # TensorFlow names the peer when its heartbeats stopped; when the collective in flight
    # breaks first (the peer's connection reset: the benchmark saw 0.1 s once) it cannot
    lost = "tfgpu: error: this multi-worker group lost "
    assert lost + "the peer /job:worker/replica:0/task:1" in logs or lost + "a peer" in logs, logs[
        -3000:
    ]
    last_begun = max(int(text) for text, _ in survivor.marks("epoch"))
    print(f"survivor exited {code} {took:.1f}s after its peer was killed (epoch {last_begun})")
    workers_group.remove(first)
    again = workers_group.start(multiworker_image, rendered, ["fit", "4", "6", "0", backup])
    assert run_all(workers_group, again, GROUP_TIMEOUT_S) == [0, 0], describe(again)
    for w in again:
        resumed = int(w.marks("epoch")[0][0])
        assert 1 <= resumed <= last_begun, describe(again)  # not from step 0
    assert len({_weights(w.marks("fit-weights")) for w in again}) == 1


def test_a_bad_variable_exits_78_before_tensorflow_starts(
    workers_group: Group, multiworker_image: str, rendered: Rendered
) -> None:
    (worker,) = workers_group.start(multiworker_image, rendered, ["loop", "4"], indices=[2])
    assert worker.wait(60) == 78
    logs = worker.logs()
    assert "JOB_COMPLETION_INDEX='2' is not valid (only 2 workers)" in logs
    assert "tfgpu: nothing was started" in logs
    assert "mw: python-started" not in logs  # the training program never ran


def test_the_rendered_env_is_all_the_workers_get(rendered: Rendered) -> None:
    assert "TF_CONFIG" not in rendered.env
    assert rendered.env["TF_GPU_WORKER_HOSTS"] == "tfgpu-train-{index}.tfgpu-train"
    assert rendered.alias(1) == "tfgpu-train-1.tfgpu-train"


def test_module_doc_names_this_directory() -> None:
    assert Path(__file__).parent.name == "multiworker"

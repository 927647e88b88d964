"""Parameter-server training in real containers of the kit's 2.21 image.

One chief, 2 workers and 1 parameter server as `build.py k8s --workers 2 --ps 1 --jobset` renders
them (tests/multiworker/ps_group.py: each role's rendered env and args, the indexed Job's
JOB_COMPLETION_INDEX,
the JobSet's pod DNS names as network aliases, no TF_CONFIG); workers and the parameter server run
`tfgpu server`, the chief ps_train.py: tf.distribute.experimental.ParameterServerStrategy with a
ClusterCoordinator training a small linear model on the CPU. Proved:

- one cluster: the chief's log names the workers and parameter server it used (the kit's
  `tfgpu: cluster:` line, the coordinator's worker count, the variables on /job:ps), the loss
  falls; each server says which task it serves;
- without the kit's TF_CONFIG (TF_GPU_CONFIG=off, the same containers) there is no cluster: the
  servers exit 78 and the chief has none, so these tests fail when the kit stops building it;
- a killed worker is survived, as TensorFlow documents: ClusterCoordinator "comes with built-in
  fault tolerance for worker failures. That is, when some workers are not available [...] the
  training progress continues to be made with the remaining workers" (TensorFlow 2.21.0, PyPI
  wheel tensorflow==2.21.0, tensorflow/python/distribute/coordinator/cluster_coordinator.py,
  ClusterCoordinator's docstring); every round after the kill completes and the chief exits 0;
- a killed parameter server ends the chief's run: "When a parameter server fails, a
  `tf.errors.UnavailableError` is raised by `schedule`, `join` or `done`" (the same docstring);
  the chief exits non-zero within PS_LOST_BOUND_S with the kit's line naming it.

Local re-run with an image already built: TFGPU_MULTIWORKER_IMAGE=REF (see conftest.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import docker
import pytest

from tests.multiworker.group import Group, describe, group
from tests.multiworker.ps_group import (
    alias,
    finished_at,
    line_time,
    marks,
    rendered,
    start_cluster,
    start_task,
    wait_for_mark,
)

pytestmark = pytest.mark.docker

GROUP_TIMEOUT_S = 240.0
PS_LOST_BOUND_S = 120.0  # measured: 39 s (gRPC's connect timeout to the lost address)
WORKER_LOST_ROUNDS = ["12", "4", "0.5"]  # 12 rounds of 4 steps, 0.5 s apart: room for a kill
PLAIN_END = [*WORKER_LOST_ROUNDS, "plain"]  # the script ends as a user's does: no os._exit
GRACE_S = 10.0  # TF_GPU_EXIT_GRACE's default
PEER_LOST_GRACE_S = 2.0  # tfgpu.commands.exit_watch
ANNOUNCE_S = (
    3.0  # tfgpu.commands.chief_done: a chief done with 0 tells its servers, then its pod ends
)
SLACK_S = 3.0  # docker's own bookkeeping of a container's end, on a loaded CI host


@pytest.fixture
def cluster_group(docker_client: docker.DockerClient) -> Iterator[Group]:
    with group(docker_client) as made:
        yield made


def test_the_chief_trains_on_the_workers_and_parameter_server(
    cluster_group: Group, multiworker_image: str
) -> None:
    chief, workers, ps = start_cluster(cluster_group, multiworker_image, ["3", "4"])
    assert chief.wait(GROUP_TIMEOUT_S) == 0, describe([chief, *workers, *ps])
    logs = chief.logs()
    peers = ", ".join(f"{alias(r, i)}:2222" for r, i in (("worker", 0), ("worker", 1), ("ps", 0)))
    assert (
        f"tfgpu: cluster: chief 0 of 1 chief, 2 worker, 1 ps at {alias('chief', 0)}:2222 "
        f"(built by the kit); peers: {peers}"
    ) in logs
    assert marks(chief, "workers")[0][0] == "2 ps 1"  # the coordinator's workers, the ps tasks
    assert marks(chief, "variables")[0][0] == " ".join(
        ["/job:ps/replica:0/task:0/device:CPU:0"] * 2
    )
    losses = [float(text.split()[-1]) for text, _ in marks(chief, "round")]
    assert len(losses) == 3 and losses[2] < losses[0], losses
    for role, tasks in (("worker", workers), ("ps", ps)):
        for task in tasks:
            # every interface: [::] where the network has IPv6, 0.0.0.0 where it has not
            assert re.search(
                rf"tfgpu: server: {role} {task.index} listening on (\[::\]|0\.0\.0\.0):2222, "
                rf"reached by its peers as {re.escape(alias(role, task.index))}:2222",
                task.logs(),
            ), describe([task])
    assert "tfgpu: server: ps 0 of 1 chief, 2 worker, 1 ps" in ps[0].logs()


def test_without_the_kits_tf_config_there_is_no_cluster(
    cluster_group: Group, multiworker_image: str
) -> None:
    chief, workers, ps = start_cluster(
        cluster_group, multiworker_image, ["3", "4"], extra_env={"TF_GPU_CONFIG": "off"}
    )
    assert chief.wait(GROUP_TIMEOUT_S) != 0, describe([chief])
    assert marks(chief, "tf-config")[0][0] == "<unset>"
    assert marks(chief, "no-cluster") and not marks(chief, "done")
    for server in (*workers, *ps):
        assert server.wait(60) == 78, describe([server])
        assert "there is no cluster to serve" in server.logs()


def test_a_killed_worker_is_survived(cluster_group: Group, multiworker_image: str) -> None:
    chief, workers, ps = start_cluster(cluster_group, multiworker_image, WORKER_LOST_ROUNDS)
    wait_for_mark(chief, "round 2", GROUP_TIMEOUT_S)
    workers[1].container.kill()
    t_kill = time.time()
    assert chief.wait(GROUP_TIMEOUT_S) == 0, describe([chief, workers[0], *ps])
    after = [t for _, t in marks(chief, "round") if t > t_kill]
    assert len(marks(chief, "round")) == 12 and len(after) >= 3, chief.logs()[-4000:]
    assert marks(chief, "done")
    # the coordinator saw the worker fail (and ran its closures on the other one)
    assert "Worker /job:worker/replica:0/task:1 failed" in chief.logs()
    print(f"killed worker: {len(after)} rounds completed after the kill")


def test_a_killed_parameter_server_ends_the_run_with_a_clear_message(
    cluster_group: Group, multiworker_image: str
) -> None:
    chief, _, ps = start_cluster(cluster_group, multiworker_image, WORKER_LOST_ROUNDS)
    wait_for_mark(chief, "round 2", GROUP_TIMEOUT_S)
    ps[0].container.kill()
    t_kill = time.monotonic()
    code = chief.wait(PS_LOST_BOUND_S)
    took = time.monotonic() - t_kill
    logs = chief.logs()
    assert code != 0 and not marks(chief, "done"), logs[-4000:]
    assert (
        "tfgpu: error: this parameter-server cluster lost the parameter server "
        "/job:ps/replica:0/task:0"
    ) in logs, logs[-4000:]
    print(f"killed parameter server: the chief exited {code} {took:.1f}s later")


def test_the_rendered_jobset_gives_the_names_and_commands_the_containers_run() -> None:
    """The containers' network aliases are the DNS names the rendered JobSet tells each role,
    workers and parameter servers run `tfgpu server`, and nothing renders a TF_CONFIG."""
    roles = rendered(2, 1)
    assert sorted(roles) == ["chief", "ps", "worker"]
    for role, (args, env) in roles.items():
        assert env["TF_GPU_ROLE"] == role and "TF_CONFIG" not in env
        assert env["TF_GPU_WORKER_HOSTS"].replace("{index}", "1") == alias("worker", 1)
        assert env["TF_GPU_PS_HOSTS"].replace("{index}", "0") == alias("ps", 0)
        assert env["TF_GPU_CHIEF_HOST"] == alias("chief", 0)
        assert (args == ["tfgpu", "server"]) == (role != "chief")


# --- runs end: a bounded end for every role (TF_GPU_EXIT_GRACE, tfgpu.commands.chief_done)
# -------------


def test_a_chief_that_lost_a_worker_for_good_ends_within_the_grace(
    cluster_group: Group, multiworker_image: str
) -> None:
    """Before: the chief printed its result and its process never exited (ClusterCoordinator's
    exit waits for the lost worker's recovery), so its Job never completed."""
    chief, workers, ps = start_cluster(cluster_group, multiworker_image, PLAIN_END)
    wait_for_mark(chief, "round 2", GROUP_TIMEOUT_S)
    workers[1].container.kill()  # and never replaced
    assert chief.wait(GROUP_TIMEOUT_S) == 0, describe([chief, workers[0], *ps])
    done = marks(chief, "done")[0][1]
    took = finished_at(chief) - done
    assert took <= GRACE_S + ANNOUNCE_S + SLACK_S, (took, chief.logs()[-3000:])
    if "had not exited" in chief.logs():  # the process, ended by the grace
        assert line_time(chief, "had not exited") - done <= GRACE_S + SLACK_S
    assert "told 2 of its 3 servers" in chief.logs()  # the killed worker is not waited for
    print(f"worker lost for good: the chief's pod ended {took:.1f}s after its last line")


def test_a_worker_replaced_after_the_end_does_not_keep_the_chief(
    cluster_group: Group, multiworker_image: str
) -> None:
    chief, workers, ps = start_cluster(cluster_group, multiworker_image, PLAIN_END)
    wait_for_mark(chief, "round 2", GROUP_TIMEOUT_S)
    workers[1].container.kill()
    cluster_group.remove([workers[1]])
    wait_for_mark(chief, "done", GROUP_TIMEOUT_S)
    args, env = rendered(2, 1)["worker"]
    start_task(cluster_group, multiworker_image, "worker", 1, args, env)  # back, too late
    assert chief.wait(GROUP_TIMEOUT_S) == 0, describe([chief, *ps])
    took = finished_at(chief) - marks(chief, "done")[0][1]
    assert took <= GRACE_S + ANNOUNCE_S + SLACK_S, (took, chief.logs()[-3000:])
    print(f"worker back after the end: the chief's pod ended {took:.1f}s after its last line")


def test_a_chief_that_lost_its_parameter_server_ends_within_seconds_of_the_line(
    cluster_group: Group, multiworker_image: str
) -> None:
    """Before: about 20 s of gRPC retries after the kit's line, on every restart of the job."""
    chief, _, ps = start_cluster(cluster_group, multiworker_image, PLAIN_END)
    wait_for_mark(chief, "round 2", GROUP_TIMEOUT_S)
    ps[0].container.kill()
    code = chief.wait(PS_LOST_BOUND_S)
    assert code != 0, chief.logs()[-3000:]
    said = line_time(chief, "tfgpu: error: this parameter-server cluster lost")
    took = finished_at(chief) - said
    assert took <= PEER_LOST_GRACE_S + SLACK_S, (took, chief.logs()[-3000:])
    print(f"parameter server lost: the chief exited {code} {took:.1f}s after the kit's line")


def test_the_servers_end_when_the_chief_has_completed(
    cluster_group: Group, multiworker_image: str
) -> None:
    """Plain Jobs: nothing else ends the workers and parameter servers (a JobSet's success
    policy does); they read the chief's banner and exit 0 within a poll of its end."""
    chief, workers, ps = start_cluster(cluster_group, multiworker_image, ["3", "4", "0", "plain"])
    assert chief.wait(GROUP_TIMEOUT_S) == 0, describe([chief, *workers, *ps])
    assert "tfgpu: the chief has completed; told 3 of its 3 servers" in chief.logs(), chief.logs()
    chief_end = finished_at(chief)
    for server in (*workers, *ps):
        assert server.wait(60) == 0, describe([server])
        assert "tfgpu: server: the chief has completed; this server ends (exit 0)" in server.logs()
        after = finished_at(server) - chief_end
        assert after <= SLACK_S, (after, server.logs()[-2000:])
        print(f"server {server.index}: ended {after:+.1f}s from the chief's end")

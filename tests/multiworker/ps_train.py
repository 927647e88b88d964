"""Run by the chief container of tests/multiworker/test_parameter_servers.py (and
benchmarks/parameter_servers.py): a tiny linear model trained with
tf.distribute.experimental.ParameterServerStrategy and a ClusterCoordinator on the CPU. The
cluster comes from the kit alone: TF_CONFIG is built by the image's runtime from TF_GPU_PS,
TF_GPU_WORKERS and the rest; the workers and parameter servers run `tfgpu server`.

    python ps_train.py ROUNDS STEPS [PAUSE [END]]
      ROUNDS rounds of STEPS steps scheduled on the coordinator, joined after each round,
      PAUSE seconds between rounds (room for the tests to kill a task); END `plain` ends as
      TensorFlow's tutorial does (the script returns), else with os._exit(0) (below)

It prints the `ps:` lines the tests read. A task of the cluster that is not up yet is waited for
(DNS and TCP, bounded): pods start in any order, and the strategy's first connection would fail.
"""

import json
import os
import socket
import sys
import time

CONNECT_TIMEOUT_S = 120.0


def say(*parts: object) -> None:
    print("ps:", *parts, f"t={time.time():.3f}", flush=True)


say("python-started")
say("tf-config", os.environ.get("TF_CONFIG", "<unset>"))
import tensorflow as tf  # noqa: E402

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
spec = resolver.cluster_spec().as_dict()
if "ps" not in spec:
    say("no-cluster", json.dumps(spec))
    sys.exit(3)
deadline = time.monotonic() + CONNECT_TIMEOUT_S
for role in ("worker", "ps"):
    for address in spec[role]:
        host, _, port = address.rpartition(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
say("cluster-up", json.dumps(spec, sort_keys=True), "task", resolver.task_type, resolver.task_id)

strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
say("workers", len(coordinator._cluster.workers), "ps", strategy.extended._num_ps)

with strategy.scope():
    w = tf.Variable(tf.zeros([4, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
say("variables", w.device, b.device)

x = tf.random.stateless_normal([64, 4], seed=[1, 2])
y = x @ tf.constant([[1.0], [-2.0], [3.0], [0.5]]) + 0.25


@tf.function
def step() -> tf.Tensor:
    def replica_fn() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w + b - y) ** 2)
        grads = tape.gradient(loss, [w, b])
        w.assign_sub(0.05 * grads[0])
        b.assign_sub(0.05 * grads[1])
        return loss

    return strategy.run(replica_fn)


rounds, steps = int(sys.argv[1]), int(sys.argv[2])
pause = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
for r in range(rounds):
    losses = [coordinator.schedule(step) for _ in range(steps)]
    coordinator.join()
    if r == 0:
        say("first-round-done")
    say("round", r, "loss", f"{float(losses[-1].fetch()):.4f}")
    time.sleep(pause)
say("done", "weights", json.dumps([round(float(v), 4) for v in w.numpy().ravel()]))
plain = len(sys.argv) > 4 and sys.argv[4] == "plain"
# Measured here (TF 2.21.0): after a worker was lost, the process did not exit within 120 s of
# this line, whether or not the worker came back. faulthandler's stack: the interpreter's exit
# runs ClusterCoordinator.__del__ -> Cluster.stop -> the failure handler's stop(), which waits for
# its _cluster_update_lock, held by the WorkerPreemptionHandler thread while it recovers the lost
# worker (tensorflow/python/distribute/coordinator/cluster_coordinator.py of the 2.21.0 wheel,
# lines 1486, 1329, 861). So a chief that has finished ends its process itself, unless `plain`:
# then the script ends as a user's does, and the kit's exit grace (TF_GPU_EXIT_GRACE) bounds it.
if not plain:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

"""Run inside each worker container by tests/multiworker (and benchmarks/multiworker.py): a tiny
model trained a few steps with tf.distribute.MultiWorkerMirroredStrategy on the CPU. The cluster
comes from the kit alone: TF_CONFIG is built by the image's runtime from TF_GPU_WORKERS* and
JOB_COMPLETION_INDEX, as in a pod of `build.py k8s --workers N`.

    python mw_train.py MODES STEPS [EPOCHS [PAUSE [BACKUP_DIR]]]
      MODES: loop (a custom training loop of STEPS steps), fit (tf.keras model.fit with tf-keras:
      EPOCHS of STEPS steps, PAUSE seconds after each, BackupAndRestore into BACKUP_DIR), or
      loop,fit (both, in one cluster)

Each worker trains on data of its own (seeded by its JOB_COMPLETION_INDEX), so only gradients
averaged across the workers give every worker the same weights. It prints the `mw:` lines that
the tests read.
"""

import hashlib
import json
import os
import sys
import time


def say(*parts: object) -> None:
    print("mw:", *parts, f"t={time.time():.3f}", flush=True)


say("python-started")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

say("tf-config", os.environ.get("TF_CONFIG", "<unset>"))
# Nothing may initialise TensorFlow's context before this (listing logical devices would):
# collective ops are configured at program start-up.
strategy = tf.distribute.MultiWorkerMirroredStrategy()
resolver = strategy.cluster_resolver
task = resolver.task_id
say("cluster-formed", json.dumps(resolver.cluster_spec().as_dict()), "task", task)
local = f"/job:worker/replica:0/task:{task}/"
cpus = tf.config.list_logical_devices("CPU")
say("local-logical-cpus", sum(local in d.name for d in cpus) if task is not None else len(cpus))

# the pod's own index (Kubernetes sets it with or without the kit): each worker's data differs
rng = np.random.default_rng(1000 + int(os.environ.get("JOB_COMPLETION_INDEX", "0")))
x = rng.normal(size=(64, 4)).astype("float32")
y = (x @ np.array([[1.0], [-2.0], [3.0], [0.5]], dtype="float32") + 0.25).astype("float32")
modes = sys.argv[1].split(",")
steps = int(sys.argv[2])
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
backup = sys.argv[5] if len(sys.argv) > 5 else ""


def digest(arrays: list) -> str:
    flat = np.concatenate([np.asarray(a, dtype="float32").ravel() for a in arrays])
    return (
        hashlib.sha256(flat.tobytes()).hexdigest()[:16]
        + " "
        + json.dumps([round(float(v), 6) for v in flat])
    )


if "loop" in modes:
    with strategy.scope():
        mean = tf.VariableAggregation.MEAN  # a replica's update is averaged over all replicas
        w = tf.Variable(tf.zeros((4, 1)), aggregation=mean)
        b = tf.Variable(tf.zeros((1,)), aggregation=mean)

    @tf.function
    def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        def replica(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.matmul(xb, w) + b - yb) ** 2)
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.05 * gw)
            b.assign_sub(0.05 * gb)
            return loss

        return strategy.run(replica, args=(xb, yb))

    for i in range(steps):
        rows = slice(i % 8 * 8, i % 8 * 8 + 8)
        loss = step(tf.constant(x[rows]), tf.constant(y[rows]))
        say("step", i, "loss", f"{float(loss):.6f}")
    say("loop-weights", digest([w.numpy(), b.numpy()]))
if "fit" in modes:
    keras = tf.keras
    say("keras", keras.__name__, getattr(keras, "__version__", "?"))  # tf_keras: Keras 2
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(8).with_options(options)

    class Log(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: object = None) -> None:
            say("epoch", epoch)

        def on_train_batch_end(self, batch: int, logs: object = None) -> None:
            say("batch", batch)
            time.sleep(pause)

    callbacks = [Log()]
    if backup:
        callbacks.insert(0, keras.callbacks.BackupAndRestore(backup_dir=backup))
    model.fit(data, epochs=epochs, steps_per_epoch=steps, callbacks=callbacks, verbose=0)
    say("fit-weights", digest(model.get_weights()))
say("done")

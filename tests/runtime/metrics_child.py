"""A user's TensorFlow program, driven over stdin by test_metrics.py. It never calls the
kit: the metrics server comes from the hook (TF_GPU_METRICS_PORT) at `import tensorflow`."""

import sys

import tensorflow as tf

kept = []
print("ready", flush=True)
for line in sys.stdin:
    command, _, arg = line.strip().partition(" ")
    if command == "status":
        from tensorflow.python.eager import context

        print(f"initialized {context.context()._initialized}", flush=True)
    elif command == "alloc":  # arg MiB of float32 on CPU:0
        with tf.device("/device:CPU:0"):
            kept.append(tf.ones([int(arg), 256, 1024], tf.float32))
        print("done", flush=True)
    elif command == "free":
        kept.clear()
        print("done", flush=True)
    elif command == "exit":
        break

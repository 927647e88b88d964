"""Run inside a kit container by the GPU tests (mounted read-only): an unmodified user program
that only uses TensorFlow, so that what it sees is what the kit's hook configured.

    python probe.py devices          initialise TensorFlow, list its logical GPUs
    python probe.py touch            one small tensor on each logical GPU
    python probe.py fill MIB [HOLD]  MIB-sized tensors on GPU:0, kept, until TensorFlow refuses;
                                     then keep them HOLD seconds (processes that fill at once)
    python probe.py serve SECONDS    allocate, then stay up (the metrics endpoint serves)
    python probe.py recover MIB SECONDS
                                     first run in this container: say so, then fill GPU:0 as
                                     `fill` does and hold it (stuck at the cap); after a restart
                                     (its mark in /var/tmp survives Docker's restarts): 64 MiB,
                                     stay up
    python probe.py peak MIB COUNT SECONDS
                                     COUNT tensors of MIB on GPU:0, held 1 s, let go, 64 MiB,
                                     stay up (a busy process that peaks, below TensorFlow's OOM)

Prints one line `PROBE-JSON {...}` on stdout. Only ops that the fake driver can run are used
(tf.zeros, Variables, element-wise ops: no cuBLAS/cuDNN), and no numerical result is read.
"""

import json
import os
import sys
import time

import tensorflow as tf

MIB = 1 << 20


def memory(device):
    info = tf.config.experimental.get_memory_info(device)
    return {"current": info["current"], "peak": info["peak"]}


def fill(mib):
    """MIB-sized tensors on GPU:0 until TensorFlow refuses; (tensors kept, error name)."""
    size = mib * MIB // 4  # float32 elements
    kept, error = [], None
    try:
        with tf.device("/device:GPU:0"):
            for _ in range(10000):
                kept.append(tf.Variable(tf.zeros([size])))
    except Exception as exc:  # ResourceExhaustedError is what a cap ends in
        error = type(exc).__name__
    return kept, error


def main(argv):
    command = argv[1] if len(argv) > 1 else "devices"
    out = {"command": command}
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]  # initialises the runtime
    out["logical_gpus"] = gpus
    if command == "touch":
        kept = []
        for name in gpus:
            with tf.device(name):
                kept.append(tf.zeros([1024]))
        out["memory"] = {name: memory(name) for name in gpus}
    elif command == "fill":
        kept, error = fill(int(argv[2]))
        out.update(tensors=len(kept), error=error, memory=memory("/device:GPU:0"))
        if len(argv) > 3:
            print("PROBE-JSON " + json.dumps(out), flush=True)
            time.sleep(float(argv[3]))
            return 0
    elif command == "recover":
        mark = "/var/tmp/probe-was-stuck"
        if not os.path.exists(mark):
            open(mark, "w").close()
            print("PROBE-JSON " + json.dumps({**out, "phase": "filling"}), flush=True)
            # TensorFlow's BFC allocator waits (up to 10 s) for memory before it refuses: the
            # process sits at its cap meanwhile, which is what the recovery rule is for.
            kept, error = fill(int(argv[2]))
            out.update(phase="stuck", tensors=len(kept), error=error)
        else:
            with tf.device("/device:GPU:0"):
                kept = [tf.Variable(tf.zeros([64 * MIB // 4]))]
            out["phase"] = "after-restart"
        out["memory"] = memory("/device:GPU:0")
        print("PROBE-JSON " + json.dumps(out), flush=True)
        time.sleep(float(argv[3]))
        return 0
    elif command == "peak":
        size = int(argv[2]) * MIB // 4
        with tf.device("/device:GPU:0"):
            kept = [tf.Variable(tf.zeros([size])) for _ in range(int(argv[3]))]
        out["peak"] = memory("/device:GPU:0")
        time.sleep(1)
        del kept
        with tf.device("/device:GPU:0"):
            kept = [tf.Variable(tf.zeros([64 * MIB // 4]))]
        out.update(phase="let-go", memory=memory("/device:GPU:0"))
        print("PROBE-JSON " + json.dumps(out), flush=True)
        time.sleep(float(argv[4]))
        return 0
    elif command == "serve":
        with tf.device(gpus[0] if gpus else "/CPU:0"):
            kept = [tf.Variable(tf.zeros([64 * MIB // 4]))]
        out["memory"] = {name: memory(name) for name in gpus}
        print("PROBE-JSON " + json.dumps(out), flush=True)
        time.sleep(float(argv[2]))
        return 0
    print("PROBE-JSON " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

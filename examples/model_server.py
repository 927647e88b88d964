"""A tiny model server for the compose example: a small real Keras model, built in
code (no weights are downloaded), behind a standard-library HTTP endpoint.

    python model_server.py --model text  --port 8501
    python model_server.py --model image --port 8502

GET  /healthz  200 once the model has answered a warm-up prediction; the body says
               which model it is and the GPU memory settings of this very process.
GET  /memory   the same memory report alone.
POST /predict  text:  {"text": "a great film"}          -> {"label": …, "probabilities": […]}
               image: {"pixels": 28×28 numbers in [0, 1]} -> {"label": …, "probabilities": […]}
               Optional "batch": N (1…1024) predicts the input N times in one call, as a
               client batching requests would (the answer is the first row's): a bigger
               batch makes TensorFlow allocate bigger tensors, which the memory metrics
               (TF_GPU_METRICS_PORT) show.

The model weights are random (seeded): the point is a real TensorFlow workload whose
memory the kit caps, not a useful classifier. The process is plain `python`: the kit's
hook configures TensorFlow when it is imported, exactly as for any user's program.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TEXT_LEN, VOCAB = 32, 1000
TEXT_LABELS = ["negative", "positive"]
IMAGE_SIDE = 28
IMAGE_LABELS = [str(d) for d in range(10)]
MAX_BATCH = 1024


def build_model(kind: str) -> Any:
    import keras  # the kit's hook has configured TensorFlow by the time this returns

    keras.utils.set_random_seed(42)
    if kind == "text":
        return keras.Sequential(
            [
                keras.Input(shape=(TEXT_LEN,), dtype="int32"),
                keras.layers.Embedding(VOCAB, 16),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(len(TEXT_LABELS), activation="softmax"),
            ],
            name="text_model",
        )
    return keras.Sequential(
        [
            keras.Input(shape=(IMAGE_SIDE, IMAGE_SIDE, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(len(IMAGE_LABELS), activation="softmax"),
        ],
        name="image_model",
    )


def encode_text(text: str) -> list[int]:
    """Words hashed into the vocabulary (stable across processes, unlike hash())."""
    ids = [zlib.crc32(w.encode()) % (VOCAB - 1) + 1 for w in text.lower().split()][:TEXT_LEN]
    return ids + [0] * (TEXT_LEN - len(ids))


def memory_report() -> dict[str, Any]:
    """This process's GPU memory settings: what the kit resolved from the
    environment (`tfgpu show --json`) and what TensorFlow itself now holds."""
    import tensorflow as tf

    report: dict[str, Any] = {}
    try:
        shown = subprocess.run(
            [sys.executable, "-m", "tfgpu", "show", "--json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        report["tfgpu_show"] = json.loads(shown.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        report["tfgpu_show"] = {"error": f"{type(exc).__name__}: {exc}"}
    settings = report["tfgpu_show"].get("settings", {})
    limit = settings.get("TF_GPU_MEM_LIMIT", {}).get("value")
    growth = settings.get("TF_GPU_MEMORY_GROWTH", {}).get("value")
    report["requested"] = {"memory_limit": limit, "memory_growth": growth}

    gpus = tf.config.list_physical_devices("GPU")
    applied: dict[str, Any] = {
        # The kit turns TF_GPU_MEMORY_GROWTH into TensorFlow's native variable, in
        # this process, when TensorFlow is imported.
        "TF_FORCE_GPU_ALLOW_GROWTH": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH"),
        "gpus": [],
    }
    for gpu in gpus:
        logical = tf.config.get_logical_device_configuration(gpu) or []
        applied["gpus"].append(
            {"device": gpu.name, "memory_limit_mib": [c.memory_limit for c in logical] or None}
        )
    if not gpus:
        applied["note"] = "not applied: no GPU visible to TensorFlow in this container"
    report["applied"] = applied
    return report


class Model:
    def __init__(self, kind: str, device: str | None = None) -> None:
        import contextlib

        import numpy as np
        import tensorflow as tf

        self.kind = kind
        self.np = np
        # --device pins the model's variables and ops; default: TensorFlow's placement
        self.scope = (lambda: tf.device(device)) if device else contextlib.nullcontext
        with self.scope():
            self.model = build_model(kind)
        self.labels = TEXT_LABELS if kind == "text" else IMAGE_LABELS
        self.lock = threading.Lock()  # one prediction at a time: tiny model, simple server
        self.predict({"text": "warm up"} if kind == "text" else {})
        self.memory = memory_report()

    def predict(self, body: dict[str, Any]) -> dict[str, Any]:
        np = self.np
        if self.kind == "text":
            text = body.get("text")
            if not isinstance(text, str):
                raise ValueError('expected {"text": "some words"}')
            x = np.array([encode_text(text)], dtype="int32")
        else:
            pixels = body.get("pixels", [[0.0] * IMAGE_SIDE] * IMAGE_SIDE)
            x = np.asarray(pixels, dtype="float32").reshape(1, IMAGE_SIDE, IMAGE_SIDE, 1)
        batch = body.get("batch", 1)
        if type(batch) is not int or not 1 <= batch <= MAX_BATCH:
            raise ValueError(f'"batch" must be a whole number from 1 to {MAX_BATCH}')
        x = np.repeat(x, batch, axis=0)
        with self.lock, self.scope():
            probs = self.model(x, training=False).numpy()[0].tolist()
        best = max(range(len(probs)), key=probs.__getitem__)
        return {
            "model": self.kind,
            "label": self.labels[best],
            "probabilities": probs,
            "batch": batch,
        }


def make_handler(model: Model) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(200, {"status": "ok", "model": model.kind, "memory": model.memory})
            elif self.path == "/memory":
                self._send(200, model.memory)
            else:
                self._send(404, {"error": f"no such path {self.path}"})

        def do_POST(self) -> None:
            if self.path != "/predict":
                self._send(404, {"error": f"no such path {self.path}"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                self._send(200, model.predict(body))
            except (ValueError, TypeError) as exc:
                self._send(400, {"error": str(exc)})

        def log_message(self, format: str, *args: Any) -> None:  # one line per request
            sys.stderr.write(f"model_server: {self.address_string()} {format % args}\n")

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["text", "image"], required=True)
    parser.add_argument("--port", type=int, default=int(os.environ.get("MODEL_PORT", "8501")))
    parser.add_argument(
        "--device",
        default=os.environ.get("MODEL_DEVICE") or None,
        help="where the model runs, e.g. /CPU:0 or /device:GPU:1 (default: TensorFlow's "
        "placement; env MODEL_DEVICE). The tests pin /CPU:0 on the fake driver, which "
        "computes nothing",
    )
    args = parser.parse_args()
    if args.device and not re.fullmatch(r"/(device:)?(CPU|GPU):[0-9]+", args.device, re.I):
        parser.error(f"--device {args.device!r}: expected /CPU:0 or /device:GPU:N")

    model = Model(args.model, args.device)
    server = ThreadingHTTPServer(("0.0.0.0", args.port), make_handler(model))

    # `docker stop` sends SIGTERM: finish the request in flight, then exit 0.
    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"model_server: {args.model} model ready on :{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()
    server.server_close()
    print("model_server: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

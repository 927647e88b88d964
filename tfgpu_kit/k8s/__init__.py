"""`build.py k8s`: Kubernetes manifests for an image built by the kit. The flags (flags.py), the
pods' environment (env.py), their bounds (limits.py), the multi-worker group (workers.py), and the
manifests checked and rendered from them (manifests.py)."""

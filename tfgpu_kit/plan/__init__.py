"""GPU memory budgets for compose files and Kubernetes manifests (`build.py plan`).

Readers (compose, kube) turn input files into Workloads; caps resolves each
workload's TensorFlow caps with the runtime's own parsers (tfgpu.contract.settings);
budget places them on GPUs and judges the result; report prints it."""

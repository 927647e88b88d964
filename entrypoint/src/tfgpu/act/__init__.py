"""The act tier holds what runs inside the user's Python process: the hook, apply, the program's
exit as it tells `tfgpu run`, the metrics, the recovery watch, the pip hint and Jupyter's
settings."""

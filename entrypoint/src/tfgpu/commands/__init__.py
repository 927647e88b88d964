"""The commands tier holds the `tfgpu` command and what it runs: `run` (with PID 1 and the exit
grace), `show`, `check` and its child, `check --build`, `server` (and the end it takes from its
chief) and the image's build record."""

"""The contract tier holds the environment contract (settings, names, durations, the recovery rule,
the cluster spec), the GPU-support rule, errors, and the shapes of findings and of `check
--json`; it imports nothing of the other tiers."""

"""The plan tier turns settings and GPUs into the device plan and each GPU's verdict, checked before
the command starts."""

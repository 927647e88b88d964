"""tfgpu: configure TensorFlow's GPU memory from environment variables.

Kept empty on purpose: the `.pth` hook imports `tfgpu._hook` at every interpreter
start, which imports this file first, so nothing here may cost time.
"""

__version__ = "0.1.0"

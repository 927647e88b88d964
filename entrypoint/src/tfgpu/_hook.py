"""The hook's public name: `tfgpu-hook.pth` runs `import tfgpu._hook` at every interpreter start.

This door is the module tfgpu.act._hook itself: it puts that module in sys.modules under its own
name too, so both names are one module (its state, and what a test patches)."""

import sys

from tfgpu.act import _hook

sys.modules[__name__] = _hook

"""Jupyter as root under its public name: the config that `python3 -m tfgpu.jupyter_cull install`
writes imports it.

This door is the module tfgpu.act.jupyter_root itself: it puts that module in sys.modules under
its own name too, so both names are one module (its state, and what a test patches)."""

import sys

from tfgpu.act import jupyter_root

sys.modules[__name__] = jupyter_root

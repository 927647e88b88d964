"""Jupyter's culling under its public name: the jupyter images run `python3 -m tfgpu.jupyter_cull
install`, and the config it writes imports it.

This door is the module tfgpu.act.jupyter_cull itself: it puts that module in sys.modules under
its own name too, so both names are one module (its state, and what a test patches)."""

import sys

from tfgpu.act import jupyter_cull

if __name__ == "__main__":  # python3 -m tfgpu.jupyter_cull: the module's own main
    sys.exit(jupyter_cull.main())

sys.modules[__name__] = jupyter_cull

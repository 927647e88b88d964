"""The build record under its public name: every image's build runs `python3 -m tfgpu.image_record`.

This door is the module tfgpu.commands.image_record itself: it puts that module in sys.modules
under its own name too, so both names are one module (its state, and what a test patches)."""

import sys

from tfgpu.commands import image_record

if __name__ == "__main__":  # python3 -m tfgpu.image_record: the module's own main
    sys.exit(image_record.main())

sys.modules[__name__] = image_record

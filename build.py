#!/usr/bin/env python3
"""build.py: the kit's command line (see docs/build.md, or `python build.py --help`)."""

from tfgpu_kit.cli import main

raise SystemExit(main())

#!/usr/bin/env python3
"""build.py: the kit's command line (see docs/build.md, or `python build.py --help`)."""

import sys

try:
    from tfgpu_kit.cli import main
except ImportError as missing:  # run without the kit's dependencies (./kit installs them)
    sys.stderr.write(
        f"build.py: {missing} ({sys.executable} lacks the kit's dependencies): run ./kit "
        f"instead (it creates .venv), or {sys.executable} -m pip install -r "
        "requirements/build.lock -e ./entrypoint\n"
    )
    raise SystemExit(2) from None

raise SystemExit(main())

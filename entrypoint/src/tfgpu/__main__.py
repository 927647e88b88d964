"""`python -m tfgpu …` works the same as the `tfgpu` console script."""

from tfgpu.commands.cli import main

raise SystemExit(main())

"""The one Jinja2 environment the kit renders its files with (Dockerfiles, Kubernetes manifests).

StrictUndefined: a name missing from the context is an error, never an empty string in a
Dockerfile or manifest. Blocks trimmed, so `{% if %}` lines leave no blank lines behind."""

from __future__ import annotations

from pathlib import Path

import jinja2


def environment(templates: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Dockerfiles and YAML, not HTML
    )

"""Selecting images on the command line: `2.21.0-gpu`, `2.21-gpu-jupyter`, `2.21.0` (all variants),
`2.21` (all variants of 2.21.x), `gpu` (a variant, every version), `latest-gpu`, or a regex
`re:^2\\.2` matched against the image name (`2.21.0-gpu`), or `all`. Each image names the words
that select it (catalog.Image.selected_by): images/l4t.yaml's are selected by `l4t` or one of their
tags (`2.11-l4t-r35-arm64`) only: `all`, a version or a regex keep selecting images.yaml's."""

from __future__ import annotations

import re

from tfgpu_kit.matrix.catalog import Image
from tfgpu_kit.shared.errors import UsageError


def _matches(image: Image, selector: str) -> bool:
    """A word the image is selected by (its tags among them), or `all` and `re:` for those
    `all` covers (Image.in_all: images.yaml's)."""
    if selector.startswith("re:"):
        return image.in_all and re.search(selector[3:], image.name) is not None
    if selector == "all":
        return image.in_all
    return selector in image.selected_by


def select(
    images: list[Image], selectors: list[str], *, default: tuple[str, ...] = ("all",)
) -> list[Image]:
    """Images matching any selector (`default` when none given), in catalog order; a selector that
    matches nothing is a usage error naming what exists."""
    selectors = selectors or list(default)
    for selector in selectors:
        if selector.startswith("re:"):
            try:
                re.compile(selector[3:])
            except re.error as exc:
                raise UsageError(
                    f"selector {selector!r}: invalid regular expression ({exc})"
                ) from None
        if not any(_matches(image, selector) for image in images):
            known = ", ".join(image.name for image in images)
            raise UsageError(f"selector {selector!r} matches no image", hint=f"images: {known}")
    return [image for image in images if any(_matches(image, s) for s in selectors)]

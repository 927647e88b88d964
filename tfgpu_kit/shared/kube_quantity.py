"""Kubernetes resource quantities (`1Gi`, `512Mi`, `2G`, `500m`): the exact value of one, read
by quantity.go's grammar (kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/api/resource/
quantity.go @ 143ac994), and a whole number of bytes written back as one. `plan` reads the
manifests' nvidia.com/gpu amounts with it, `build.py k8s` its --memory and --shm-size."""

from __future__ import annotations

import re
from fractions import Fraction

# quantity.go: <signedNumber><suffix>, suffix binarySI | decimalExponent | decimalSI
QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<decimal>[munkMGTPE]?))",
    re.ASCII,
)
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
MAX_LENGTH = 64  # longer text is no quantity anyone means (and its number is never built)
MAX_EXPONENT = 30  # a power of ten past it is over any bound a caller takes


def parse(raw: str) -> Fraction | None:
    """A quantity string's exact value; None when it is not one. An exponent is bounded before
    it is applied, so `1e999999999` costs nothing."""
    match = QUANTITY.fullmatch(raw.strip())
    if match is None or len(raw) > MAX_LENGTH:
        return None
    sign = -1 if match["sign"] == "-" else 1
    value = sign * Fraction(match["number"].removesuffix("."))
    if match["binary"]:
        return value * BINARY[match["binary"]]
    exponent = int(match["exponent"]) if match["exponent"] else DECIMAL[match["decimal"] or ""]
    if abs(exponent) > MAX_EXPONENT:
        return Fraction(10) ** MAX_EXPONENT if value else Fraction(0)
    return value * Fraction(10) ** exponent


def of_bytes(count: int) -> str:
    """`count` bytes as the shortest exact quantity, a binary suffix on a tie: 1Gi, 1536Mi, 2G,
    1000001. Digits and a suffix only, which every Kubernetes parser reads the same."""
    written = [str(count)]
    for suffix, size in (*BINARY.items(), *((s, 10**e) for s, e in DECIMAL.items() if e > 0)):
        if count and count % size == 0:
            written.append(f"{count // size}{suffix}")
    return min(written, key=lambda text: (len(text), not text.endswith("i")))

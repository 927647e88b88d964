"""Kubernetes' and Docker's rules for names and values typed on the command line (`build.py
k8s`, `build`, `bake`): each a `re.fullmatch` (a `$` would accept a trailing newline) over
ASCII only, so that what the kit writes is what the API server or the engine would accept.

Sources (the rules are copied, not imported: neither project ships a Python validator):
- Kubernetes, k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Label (63),
  IsDNS1123Subdomain (253), IsQualifiedName and IsValidLabelValue (labels), IsValidPortNum;
  namespaces are DNS-1123 labels (apimachinery/pkg/api/validation ValidateNamespaceName),
  ConfigMaps DNS-1123 subdomains; replicas, parallelism and completions are int32 in
  k8s.io/api (apps/v1 DeploymentSpec, batch/v1 JobSpec).
- Kubernetes' quantity syntax, k8s.io/apimachinery/pkg/api/resource/quantity.go (the subset
  with a plain decimal number and a binary or decimal suffix).
- Docker image references, github.com/distribution/reference reference.go (v0.5.0 grammar):
  name [":" tag] ["@" digest], name = [domain "/"] path, at most 255 characters for the name."""

from __future__ import annotations

import re
import unicodedata

from tfgpu_kit.shared.errors import UsageError

MAX_INT32 = 2**31 - 1  # replicas, parallelism, completions (int32 in the API types)

DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
QUANTITY = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:m|Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_SUBDOMAIN = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
LABEL_KEY = re.compile(rf"(?:{_SUBDOMAIN}/)?{_LABEL_NAME}")
LABEL_VALUE = re.compile(rf"(?:{_LABEL_NAME})?")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# distribution/reference: domain-component allows capitals; path components do not.
_DOMAIN_COMPONENT = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[A-Fa-f0-9:]+\])"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_HOST}(?::(?P<port>[0-9]+))?)/)?"
    rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
MAX_IMAGE_NAME = 255


def refuse_control(flag: str, value: str, example: str) -> None:
    """UsageError naming the first control or line/paragraph-separating character in `value`.
    YAML and terminals treat these (U+0085, U+2028, U+2029, DEL, C0/C1) as line breaks or
    escapes; no name or value the kit writes needs one."""
    for char in value:
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            raise UsageError(
                f"{flag} {value!r} is not valid: it contains the control character "
                f"U+{ord(char):04X}; accepted: printable text without line breaks; example: "
                f"{flag} {example}"
            )


def dns_label(flag: str, value: str, example: str, *, longest: int = 63) -> str:
    """`value` when it is a DNS-1123 label of at most `longest` characters."""
    if not DNS_LABEL.fullmatch(value) or len(value) > longest:
        raise UsageError(
            f"{flag} {value!r} is not valid: accepted: a DNS-1123 label: at most {longest} "
            "lower-case letters, digits and '-', starting and ending with a letter or digit "
            f"(Kubernetes names); example: {flag} {example}"
        )
    return value


def image_reference(flag: str, value: str, example: str) -> str:
    """`value` when Docker's reference grammar accepts it, with a TCP port (1-65535) if any."""
    match = IMAGE_REFERENCE.fullmatch(value)
    why = ""
    if match and len(match.group("name")) > MAX_IMAGE_NAME:
        why = f" (the name is longer than {MAX_IMAGE_NAME} characters)"
    elif match and match.group("port") is not None and not 1 <= int(match.group("port")) <= 65535:
        why = " (a registry port is from 1 to 65535)"
    if not match or why:
        raise UsageError(
            f"{flag} {value!r} is not valid{why}: accepted: an image reference "
            "[HOST[:PORT]/]PATH[:TAG][@DIGEST] with a lower-case path (Docker's reference "
            f"grammar); example: {flag} {example}"
        )
    return value


def registry_port(flag: str, value: str | None) -> None:
    """UsageError when a registry prefix (`host:PORT/path`) names a port outside 1-65535:
    the reference grammar takes any digits, a TCP connection does not."""
    if value is None:
        return
    host = value.split("/", 1)[0]
    if ":" in host and not host.startswith("["):
        port = host.rsplit(":", 1)[1]
        if port.isascii() and port.isdigit() and not 1 <= int(port) <= 65535:
            raise UsageError(
                f"{flag} {value!r} is not valid (port {port}): accepted: a registry host with "
                f"an optional :PORT from 1 to 65535; example: {flag} registry.example.com:5000"
            )

"""`tfgpu check --build`: the guard a team puts in its Dockerfile, after its own layer
(`RUN tfgpu check --build`). Needs no GPU and no driver. It compares the image as it is now with
the record its tfgpu build wrote (tfgpu.image_record) and fails the build when the layer above
broke the GPU path:

- a pinned package (TensorFlow, a CUDA/cuDNN wheel of its set, Keras out of TensorFlow's range,
  tf-keras, tfgpu) replaced, removed, or joined by a CUDA wheel of another set; a file of one
  deleted or changed in size (RECORD);
- a CUDA/cuDNN library TensorFlow loads no longer loading, or another file or version loading;
- the hook's .pth gone, or a Python on PATH (or named by --python) that imports TensorFlow without
  it (a virtual environment of the team's own, tfgpu.machine.interpreter);
- the image's environment: TF_GPU_CONFIG=off, a value the runtime refuses, an image fact
  (TFGPU_IMAGE_*) unset or changed, NVIDIA's variables by which the container gets the GPU;
- a USER that cannot write the temporary folders the runtime writes (HOME under /tmp, the
  recovery record in /var/tmp).

Each finding names what changed (package, file, version before and after) and the fix. A
deliberate change of a pinned package is named with --accept NAME: it is then a warning, and the
libraries it brings are judged by TensorFlow's own version rule instead of "as built".
Exit 0: as built (warnings allowed); 1: broken.
"""

from __future__ import annotations

import json
import os
import sys

from tfgpu import is_disabled
from tfgpu.commands import image_record
from tfgpu.contract.errors import EXIT_BROKEN, EXIT_OK, ConfigError, printable
from tfgpu.contract.problems import ERROR, WARNING, Problem
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import interpreter, libs, pins, tfbuild
from tfgpu.machine.command_path import python_of, which

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Sequence, TextIO

OVERRIDE = "PIP_CONSTRAINT= pip install … (UV_CONSTRAINT= for uv) for that one RUN"
MAX_FILES_NAMED = 3
# A build step reads no terminal and starts nothing: it waits longer for a Python to answer.
BUILD_PROBE_TIMEOUT = 30.0
# the image's environment whose loss takes the GPU away (NVIDIA container runtime: without
# NVIDIA_VISIBLE_DEVICES no GPU is mounted, without compute in the capabilities no CUDA library)
_NO_GPU_VALUES = ("", "void", "none")


class Report:
    """What the checks found: one `ok` line per check that passed, problems for the rest."""

    def __init__(self) -> None:
        self.ok: List[str] = []
        self.problems: List[Problem] = []

    def error(self, what: str, fix: str) -> None:
        self.problems.append(Problem(ERROR, what, fix))

    def warn(self, what: str, fix: str = "") -> None:
        self.problems.append(Problem(WARNING, what, fix))

    @property
    def broken(self) -> bool:
        return any(p.severity == ERROR for p in self.problems)


def _pin_fix(pin: pins.Pin) -> str:
    return (
        f"this image's constraints pin {pin.line()} (what its GPU path was built with): drop or "
        f"re-pin the requirement that pulled it; to change it on purpose: {OVERRIDE}, then "
        f"`tfgpu check --build --accept {pin.name}`"
    )


def check_pins(record: Mapping[str, Any], accept: Sequence[str], report: Report) -> None:
    now = pins.installed()
    recorded = [pins.Pin.from_json(p) for p in record.get("pins", [])]
    names = {p.name for p in recorded}
    accepted = {pins.normalize(a) for a in accept}
    files_checked = 0
    before_errors = len(report.problems)
    for pin in recorded:
        dist = now.get(pin.name)
        have = dist.version if dist else None
        add = report.warn if pin.name in accepted else report.error
        tag = "accepted: " if pin.name in accepted else ""
        if pin.installed is not None and have is None:
            add(f"{tag}{pin.name} {pin.installed} ({pin.role}) was removed", _pin_fix(pin))
            continue
        if have is None:
            continue  # pinned for a later install, not installed: nothing to compare
        verdict = pins.satisfies(have, pin.spec)
        if verdict is None:
            add(f"{tag}{pin.name} {have}: cannot judge it against {pin.line()}", _pin_fix(pin))
        elif not verdict or (pin.installed and pin.spec.startswith("==") and have != pin.installed):
            was = f"{pin.installed} → {have}" if pin.installed else f"{have} installed"
            add(f"{tag}{pin.name} changed: {was} (the image pins {pin.line()})", _pin_fix(pin))
        elif dist is not None and have == pin.installed:
            known = record.get("unlike_record", {}).get(pin.name, [])
            files_checked += _check_files(pin, dist, known, report)
    for name in sorted(now):
        if pins.normalize(name) not in names and pins.is_cuda_wheel(name):
            add = report.warn if name in accepted else report.error
            add(
                f"{'accepted: ' if name in accepted else ''}{name} {now[name].version} was added: "
                "a CUDA wheel of another set than the image's (mixing CUDA releases breaks "
                "cuSOLVER)",
                f"remove it; to keep it on purpose: `tfgpu check --build --accept {name}`",
            )
    if len(report.problems) == before_errors:
        shown = ", ".join(
            f"{p.name} {now[p.name].version}"
            for p in recorded
            if p.role != pins.CUDA and p.name in now
        )
        cuda = sum(1 for p in recorded if p.role == pins.CUDA and p.name in now)
        report.ok.append(
            f"{len(recorded)} pinned packages as built ({shown}; {cuda} CUDA wheels); "
            f"{files_checked} files checked"
        )


def _check_files(pin: pins.Pin, dist: pins.Installed, known: Sequence[str], report: Report) -> int:
    """Every file RECORD lists exists with its recorded size, but those already unlike it when
    the image was built (`known`); returns how many files were checked."""
    missing, resized, checked = dist.unlike_record()
    before = set(known)
    for kind, found in (
        ("missing", [f for f in missing if f not in before]),
        ("changed", [f for f in resized if f not in before]),
    ):
        if found:
            more = len(found) - MAX_FILES_NAMED
            listed = ", ".join(found[:MAX_FILES_NAMED]) + (f" and {more} more" if more > 0 else "")
            report.error(
                f"{pin.name} {pin.installed}: {len(found)} file(s) {kind}: {listed}",
                f"do not delete or overwrite files of the GPU path; reinstall it: {OVERRIDE} "
                f"--force-reinstall --no-deps {pin.name}=={pin.installed}",
            )
    return checked


def check_libraries(
    record: Mapping[str, Any], environ: Mapping[str, str], accept: Sequence[str], report: Report
) -> None:
    before = {lib["name"]: lib for lib in record.get("libraries", [])}
    now = {lib["name"]: lib for lib in image_record.libraries(environ)}
    cuda_accepted = any(pins.is_cuda_wheel(a) for a in accept)
    info = tfbuild.build_info() or {}
    problems = len(report.problems)
    for name, old in before.items():
        new = now.get(name)
        if old.get("loaded") and (new is None or not new.get("loaded")):
            error = (new or {}).get("error") or "TensorFlow no longer needs it"
            report.error(
                f"{old['soname']} no longer loads ({error}); it loaded from {old['file']} when "
                "the image was built: TensorFlow will skip the GPU",
                "restore the CUDA/cuDNN wheel or library you removed (`tfgpu check` names them)",
            )
            continue
        if new is None or not old.get("loaded"):
            continue
        same = (old.get("file"), old.get("version")) == (new.get("file"), new.get("version"))
        if same:
            continue
        what = (
            f"{old['soname']} changed: {old['file']} ({old.get('version') or 'no version'}) → "
            f"{new['file']} ({new.get('version') or 'no version'})"
        )
        refused = libs.version_problem(new, info, record.get("tensorflow"))
        if cuda_accepted and refused is None:
            report.warn(f"accepted: {what}; TensorFlow's version rule accepts it")
        else:
            report.error(
                what + (f": {refused}" if refused else ""),
                "TensorFlow now loads another CUDA/cuDNN than the image's set: remove what put "
                "it first (a wheel of another set, LD_LIBRARY_PATH, a file in a system folder)",
            )
    if len(report.problems) == problems:
        loaded = sum(1 for lib in before.values() if lib.get("loaded"))
        report.ok.append(
            f"{loaded} CUDA/cuDNN libraries load as built"
            if before
            else "no CUDA/cuDNN libraries to load (a CPU build of TensorFlow)"
        )


def check_interpreters(
    record: Mapping[str, Any], environ: Mapping[str, str], pythons: Sequence[str], report: Report
) -> None:
    pth = record.get("hook")
    if pth and not os.path.exists(pth):
        report.error(
            f"the hook's {pth} was removed: no Python process applies the TF_GPU_* settings",
            f"reinstall the runtime: {OVERRIDE} --force-reinstall --no-deps "
            f"tfgpu=={record.get('tfgpu')}",
        )
    candidates = [[p] for p in pythons] or [
        [path] for path in (which(n, environ) for n in ("python3", "python")) if path
    ]
    seen = set()
    for command in candidates:
        python = python_of(command, environ) or command
        shown = " ".join(python)
        try:
            found = interpreter.probe(python, environ, timeout=BUILD_PROBE_TIMEOUT)
        except interpreter.ProbeFailed as e:
            report.error(
                f"{shown} did not answer: {e}",
                "name the Python your image runs with --python PATH",
            )
            continue
        if found.executable in seen:
            continue
        seen.add(found.executable)
        if found.unhooked_tensorflow:
            report.error(interpreter.refusal(python, found), interpreter.INSTALL_LINE)
        elif not found.hook:
            report.warn(
                f"{shown} does not load the tfgpu hook ({found.why()}); it has no TensorFlow now, "
                "but one installed there later would take the whole GPU",
                f"install the runtime into it: {found.executable} -m pip install --no-index "
                f"--find-links {interpreter.WHEELS} 'tfgpu[nvml,metrics]'",
            )
        else:
            report.ok.append(f"{shown} ({found.executable}) loads the hook")


def check_environment(
    record: Mapping[str, Any], environ: Mapping[str, str], report: Report
) -> None:
    problems = len(report.problems)
    if is_disabled(environ):
        report.error(
            f"TF_GPU_CONFIG={environ.get('TF_GPU_CONFIG')!r} in the image's environment turns the "
            "kit off in every container of it: no caps, no growth",
            "remove that ENV; a container can still set -e TF_GPU_CONFIG=off for itself",
        )
    else:
        try:
            parse_environment(environ)
        except ConfigError as e:
            report.error(f"the image's environment is refused by the runtime: {e}", "fix the ENV")
    before: Mapping[str, str] = record.get("env", {})
    for name, old in sorted(before.items()):
        new = environ.get(name)
        if new == old:
            continue
        shown = "unset" if new is None else f"{old!r} → {new!r}"
        if name.startswith("TFGPU_IMAGE_"):
            report.error(
                f"{name} {shown}: the runtime reads what the image is from it",
                f"keep the image's value: ENV {name}={old}",
            )
        elif name == "NVIDIA_VISIBLE_DEVICES" and (new or "").strip().lower() in _NO_GPU_VALUES:
            report.error(
                f"{name} {shown}: the NVIDIA container runtime then mounts no GPU",
                f"keep the image's value: ENV {name}={old}",
            )
        elif name == "NVIDIA_DRIVER_CAPABILITIES" and not {"compute", "all"} & set(
            (new or "").replace(" ", "").split(",")
        ):
            report.error(
                f"{name} {shown}: without 'compute' the container gets no CUDA driver library",
                f"keep the image's value: ENV {name}={old}",
            )
        else:
            report.warn(f"{name} {shown} (was the image's default)")
    constraints = os.path.join(image_record.folder(environ), image_record.CONSTRAINTS)
    for var in ("PIP_CONSTRAINT",):
        if constraints not in environ.get(var, "").split():
            report.warn(
                f"{var}={environ.get(var, '')!r} does not name {constraints}: a later pip install "
                "may replace what the GPU path depends on",
                f"ENV {var}={constraints}",
            )
    if len(report.problems) == problems:
        report.ok.append(f"the image's environment as built ({len(before)} variables)")


def check_user(environ: Mapping[str, str], report: Report) -> None:
    uid = os.getuid()
    blocked = [d for d in ("/tmp", "/var/tmp") if not os.access(d, os.W_OK | os.X_OK)]
    if blocked:
        report.error(
            f"uid {uid} cannot write {' and '.join(blocked)}: the runtime writes there (a HOME "
            "when HOME is not writable, the recovery record in /var/tmp)",
            "keep /tmp and /var/tmp mode 1777 (chmod 1777 /tmp /var/tmp as root)",
        )
        return
    home = environ.get("HOME") or "/"
    note = (
        ""
        if os.access(home, os.W_OK | os.X_OK)
        else f" (HOME={home} is not: tfgpu run gives the command one under /tmp)"
    )
    report.ok.append(f"uid {uid} can write /tmp and /var/tmp{note}")


def collect(
    environ: Mapping[str, str], pythons: Sequence[str] = (), accept: Sequence[str] = ()
) -> Dict[str, Any]:
    report = Report()
    path = os.path.join(image_record.folder(environ), image_record.RECORD)
    try:
        record = image_record.load(path)
    except (OSError, ValueError) as e:
        report.error(
            f"no tfgpu build record at {path} ({e.__class__.__name__}): not an image built by the "
            "tfgpu kit, or its /usr/share/tfgpu was removed",
            "build FROM an image of the tfgpu kit (tfgpu/tensorflow:X-gpu); keep /usr/share/tfgpu",
        )
        record = None
    if record is not None:
        check_pins(record, accept, report)
        check_libraries(record, environ, accept, report)
        check_interpreters(record, environ, pythons, report)
        check_environment(record, environ, report)
    check_user(environ, report)
    return {
        "ok": not report.broken,
        "tensorflow": (record or {}).get("tensorflow"),
        "uid": os.getuid(),
        "python": sys.executable,
        "passed": report.ok,
        "problems": [p.as_json() for p in report.problems],
    }


def render(doc: Mapping[str, Any], out: TextIO) -> None:
    w = out.write
    tensorflow = doc["tensorflow"] or "?"
    # names and versions come from package metadata: printed escaped, never raw (a terminal
    # escape in a METADATA file must not reach the build log as one)
    w(f"tfgpu check --build: the image of TensorFlow {printable(str(tensorflow))}, as uid "
      f"{doc['uid']}\n")  # fmt: skip
    for line in doc["passed"]:
        w(f"  ok: {printable(line)}\n")
    for p in doc["problems"]:
        fix = f"  fix: {printable(p['fix'])}\n" if p["fix"] else ""
        w(f"{p['severity']}: {printable(p['what'])}\n{fix}")
    errors = sum(1 for p in doc["problems"] if p["severity"] == ERROR)
    if errors:
        w(
            f"tfgpu: error: the image's GPU path is not as it was built ({errors} problem(s) "
            "above): exit 1 (in a Dockerfile's RUN, the build stops there)\n"
        )
    else:
        w("tfgpu: the GPU path is as the image was built\n")


def recorded_python(environ: Mapping[str, str]) -> Optional[str]:
    """The image's Python, when this process is another one (the `tfgpu` of a team's venv first
    on PATH): the pins are the packages that Python sees, so the check runs there."""
    try:
        record = image_record.load(os.path.join(image_record.folder(environ), image_record.RECORD))
    except (OSError, ValueError):
        return None
    python, prefix = record.get("python"), record.get("prefix")
    if not python or not prefix or prefix == sys.prefix or not os.access(python, os.X_OK):
        return None
    return str(python)


def check(
    *,
    as_json: bool = False,
    pythons: Sequence[str] = (),
    accept: Sequence[str] = (),
    environ: Optional[Mapping[str, str]] = None,
    out: Optional[TextIO] = None,
    argv: Optional[Sequence[str]] = None,
) -> int:
    """`argv` (the command line, from tfgpu.commands.cli): when given and this is not the image's
    Python, the check runs again under the image's Python (once: `--as-recorded` marks that run)."""
    environ = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    python = recorded_python(environ) if argv is not None else None
    if python is not None and argv is not None:
        import subprocess

        out.flush()
        return subprocess.run([python, "-m", "tfgpu", *argv, "--as-recorded"]).returncode
    doc = collect(environ, pythons, accept)
    if as_json:
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(doc, out)
    return EXIT_OK if doc["ok"] else EXIT_BROKEN

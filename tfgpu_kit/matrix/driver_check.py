"""What `build.py check` answers: which TensorFlow versions were asked (an entry, a minor, a patch
release), the driver (given, or the local one through NVML), and each version's verdict from
compat, as a table or JSON."""

from __future__ import annotations

import logging

from tfgpu.contract import gpu_support

from tfgpu_kit.matrix import compat, local_driver
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.versions import Arch, Version, parse_arch, parse_driver
from tfgpu_kit.shared.errors import EXIT_FAILED, UsageError
from tfgpu_kit.shared.output import print_json, table

log = logging.getLogger(__name__)


def resolve_versions(spec: specs.Spec, wanted: list[str]) -> list[tuple[str, str]]:
    """(what was asked, the matrix entry that answers) for each --tf: an entry (2.21.0), a
    minor (2.21: its newest entry) or a later patch release the matrix lists (2.14.1: its
    minor's entry, whose build answers for it)."""
    if not wanted:
        return [(v.version, v.version) for v in spec.images.versions]
    known = list(spec.matrix.tensorflow)
    patches = {p: tf for tf, build in spec.matrix.tensorflow.items() for p in build.patches}
    found = []
    for text in wanted:
        below = [Version.parse(v) for v in known if v.startswith(text + ".")]
        if text in known:
            found.append((text, text))
        elif text in patches:
            found.append((text, patches[text]))
        elif text.count(".") == 1 and below:
            found.append((text, str(max(below))))
        elif below:
            # `2` is every 2.x: answering for the newest would be a guess, not what was asked
            raise UsageError(
                f"--tf {text!r} is ambiguous: it matches {', '.join(map(str, below))}; accepted: a "
                "version (2.21.0) or a minor (2.21, its newest); example: --tf "
                f"{max(below).major_minor}"
            )
        else:
            raise UsageError(
                f"--tf {text}: not in the matrix",
                hint=f"known: {', '.join(known)}; patch releases: {', '.join(patches)}; "
                "example: --tf 2.21",
            )
    return list(dict.fromkeys(found))


def _answered_for(requested: str, entry: str) -> str | None:
    """The note a patch release gets: its answer comes from another release's build."""
    if requested in (entry, Version.parse(entry).major_minor):
        return None
    return (
        f"TensorFlow {requested}: answered with {entry}'s build (CUDA, cuDNN, architectures); "
        f"{requested}'s own build configuration is not recorded in images/matrix.yaml"
    )


def _local(arch: Arch | None) -> tuple[Version, Arch | None]:
    local = local_driver.local_driver()
    log.info("local driver %s (NVML)", local.driver_version)
    if arch is None and local.gpus:
        if len({gpu.compute_capability for gpu in local.gpus}) > 1:
            log.warning("GPUs of several architectures: judging GPU 0 only; use --gpu-arch")
        gpu = local.gpus[0]
        if gpu.compute_capability is None:
            log.warning("GPU 0 (%s): NVML gives no architecture; use --gpu-arch", gpu.name)
        else:
            arch = parse_arch(gpu.compute_capability)
            log.info("GPU 0: %s (%s)", gpu.name, arch)
    return parse_driver(str(local.driver_version), flag="NVML driver version"), arch


def _alternatives(r: compat.Assessment) -> str:
    """What to use instead of a version that does not run: the nearest that do not fail on the
    arch, the newest that runs (on an arch: not known to fail there) and, with an arch, a newer
    one that the driver runs but whose coverage of the arch is unknown."""
    text = ""
    if r.nearest:
        near = [f"{v} ({side})" for side, v in r.nearest.items() if v]
        text += f"; nearest not known to fail on {r.arch}: {' or '.join(near) or 'none'}"
    # on an arch: not "known to run", for PTX JIT on a newer GPU is mostly not reported either way
    runs = f"that the driver runs, not known to fail on {r.arch}" if r.arch else "that runs"
    text += f"; newest TensorFlow {runs}: {r.newest_runnable or 'none'}"
    if r.newest_unassessed:
        text += (
            f"; {r.newest_unassessed} runs on driver {r.driver} but is not assessed for {r.arch}"
            " (its SASS/PTX architectures are unknown)"
        )
    return text


def _print_json(
    spec: specs.Spec,
    results: list[compat.Assessment],
    driver: Version,
    arch: Arch | None,
    requested: dict[str, str],
    notes: dict[str, str],
) -> None:
    print_json(
        {
            "driver": str(driver),
            "gpu_arch": str(arch) if arch else None,
            "gpus": spec.gpus.architectures.get(f"{arch.major}.{arch.minor}") if arch else None,
            "results": [
                {
                    **r.as_json(),
                    "requested": requested.get(r.tensorflow, r.tensorflow),
                    "note": notes.get(r.tensorflow),
                }
                for r in results
            ],
            "ptx_jit": _jit_json(spec) if any(r.jit for r in results) else None,
        }
    )


def _jit_json(spec: specs.Spec) -> dict[str, object]:
    """What the PTX JIT costs, as reported, and where the kit's images keep its kernels."""
    jit = spec.gpus.ptx_jit
    return {
        "warning": jit.warning,
        "reports": [{"source": r.source, "says": r.says} for r in jit.reports],
        "kernel_cache": spec.gpus.kernel_cache.model_dump(),
    }


# what each column says of gpu_support's statuses
_KERNELS = {
    gpu_support.NATIVE: "native (SASS)",
    gpu_support.PTX_JIT: "PTX JIT, not reported",
    gpu_support.KNOWN_FAILURE: "KNOWN TO FAIL",
    gpu_support.NO_KERNELS: "no kernels",
    gpu_support.UNKNOWN: "unknown",
}
# XLA compiles for the GPU itself: where TensorFlow's kernels are native it is TensorFlow's tested
# ground; on a GPU newer than the build's SASS nothing is reported either way
_XLA = {**_KERNELS, gpu_support.NATIVE: "native", gpu_support.PTX_JIT: "not reported"}


def _verdict_words(r: compat.Assessment) -> str:
    if not r.verdict.runs:
        return r.verdict.value
    words = "runs through PTX JIT: slow first start" if r.jit else "runs"
    if r.verdict is compat.Verdict.MINOR_COMPAT:
        words += " (minor-version compatibility)"
    if r.part(gpu_support.XLA) == gpu_support.KNOWN_FAILURE:
        words += "; XLA known to fail"
    return words


def _print_table(
    spec: specs.Spec,
    results: list[compat.Assessment],
    driver: Version,
    arch: Arch | None,
    requested: dict[str, str],
) -> None:
    gpus = spec.gpus.architectures.get(f"{arch.major}.{arch.minor}") if arch else None
    title = f"driver {driver}" + (f", GPU {arch}" if arch else "") + (f" ({gpus})" if gpus else "")
    with_arch = arch is not None
    columns = ["TensorFlow", "CUDA", "verdict"]
    if with_arch:
        columns += [f"kernels on {arch}", f"XLA on {arch}"]
    footnotes: dict[tuple[str, str], dict[str, str]] = {}  # (part, what) -> {TensorFlow: why}

    def cell(r: compat.Assessment, part: str, words: dict[str, str]) -> str:
        status = r.part(part)
        failure = r.support.failure(part) if r.support is not None else None
        if failure is None:
            return words[status]
        notes = footnotes.setdefault((failure.part, failure.what), {})
        notes[r.tensorflow] = failure.why
        return f"{words[status]} [{list(footnotes).index((failure.part, failure.what)) + 1}]"

    rows = []
    for r in results:
        rows.append(
            [
                f"{requested[r.tensorflow]} (as {r.tensorflow})"
                if r.tensorflow in requested
                else r.tensorflow,
                str(r.req.cuda),
                _verdict_words(r),
                *(
                    [cell(r, gpu_support.KERNELS, _KERNELS), cell(r, gpu_support.XLA, _XLA)]
                    if with_arch
                    else []
                ),
                "; ".join(x for x in r.reasons if x not in r.failure_reasons)
                + ("" if r.verdict.runs else _alternatives(r)),
            ]
        )
    table(title, [*columns, "why"], rows)
    for number, ((part, what), by_version) in enumerate(footnotes.items(), 1):
        print(f"[{number}] {gpu_support.PART_NAMES[part]} on {arch}: {what}")
        for tf, why in by_version.items():
            print(f"    {tf}: {why}")
    if any(r.jit for r in results):
        jit = spec.gpus.ptx_jit
        print(f"PTX JIT: TensorFlow warns: {jit.warning}")
        for report_ in jit.reports:
            print(f"  {report_.source}: {report_.says}")
        cache = spec.gpus.kernel_cache
        print(
            f"  The kit's images keep the compiled kernels: CUDA_CACHE_PATH={cache.path},"
            f" CUDA_CACHE_MAXSIZE={cache.max_bytes}; put a volume there (compose.yaml does,"
            " ./kit k8s --kernel-cache) so that they outlive the container. A driver upgrade"
            " empties it (docs/gpus.md)."
        )
    for r in results:
        if r.verdict is compat.Verdict.NO and r.newest_runnable is None:
            log.warning(
                "TensorFlow %s: no TensorFlow in the matrix is known to run on driver %s%s",
                r.tensorflow,
                driver,
                f" and {arch}" if arch else "",
            )


def report(
    spec: specs.Spec,
    *,
    driver_text: str | None,
    tensorflow: list[str],
    gpu_arch: str | None,
    as_json: bool,
) -> int:
    """`build.py check`: the verdict of each asked TensorFlow version on `driver_text` (None: the
    local driver, through NVML), as a table or JSON; EXIT_FAILED when one cannot run."""
    arch = parse_arch(gpu_arch) if gpu_arch is not None else None
    asked = resolve_versions(spec, tensorflow)
    notes = {entry: note for requested, entry in asked if (note := _answered_for(requested, entry))}
    requested = {entry: text for text, entry in asked if entry in notes}
    versions = list(dict.fromkeys(entry for _, entry in asked))
    for note in notes.values():
        log.warning("%s", note)
    if driver_text is not None:
        driver = parse_driver(driver_text)
    else:
        driver, arch = _local(arch)
    results = [compat.assess(spec, tf, driver, arch) for tf in versions]
    if as_json:
        _print_json(spec, results, driver, arch, requested, notes)
    else:
        _print_table(spec, results, driver, arch, requested)
    bad = [r for r in results if not r.verdict.runs]
    if bad:
        log.error(
            "cannot run as built: %s",
            ", ".join(f"TensorFlow {r.tensorflow} ({r.verdict.value})" for r in bad),
        )
        return EXIT_FAILED
    return 0

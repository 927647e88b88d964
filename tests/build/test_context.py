"""Build contexts: the pip command lines that fetch wheels for a base (its Python, CPython's ABI
and a manylinux platform the base's glibc runs, offline from the cache first), and the locks every
wheel of a context is checked against."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest

from tfgpu_kit.image import context, lock_refresh
from tfgpu_kit.matrix import catalog, cudagap, spec
from tfgpu_kit.matrix.locks import lock_file, wheel_locks
from tfgpu_kit.shared.errors import SpecError


def _value(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


class FakePip:
    """Stands in for `context._pip`: records each pip command line; offline may fail."""

    def __init__(self, *, offline_ok: bool) -> None:
        self.offline_ok = offline_ok
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], what: str) -> None:
        self.calls.append(args)
        if what == "offline" and not self.offline_ok:
            raise context.ContextError("offline failed (pip exit 1)")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "tfgpu-kit" / "wheels" / "py3.8"


@pytest.mark.parametrize("offline_ok", [True, False])
def test_every_download_targets_the_bases_platform(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache: Path, offline_ok: bool
) -> None:
    fake = FakePip(offline_ok=offline_ok)
    monkeypatch.setattr(context, "_pip", fake)
    context.download(["prometheus-client", "numpy"], "3.8", tmp_path / "dest")
    for args in fake.calls:
        assert args[0] == "download" and args[-2:] == ["prometheus-client", "numpy"]
        assert "--only-binary=:all:" in args
        assert _value(args, "--python-version") == ["3.8"]
        assert _value(args, "--implementation") == ["cp"]
        assert _value(args, "--abi") == ["cp38"]
        platforms = _value(args, "--platform")
        assert "manylinux2014_x86_64" in platforms
        # Ubuntu 20.04 bases (2.12/2.13) have glibc 2.31: no tag newer than manylinux2014
        assert all(p in ("manylinux2014_x86_64", "manylinux_2_17_x86_64") for p in platforms)
    # offline from the cache first; PyPI only when that fails; then copied from the cache
    offline, *online, copy = fake.calls
    assert _value(offline, "--find-links") == [str(cache)] and "--no-index" in offline
    assert _value(offline, "--dest") == [str(cache)]
    if offline_ok:
        assert online == []
    else:
        (fetch,) = online
        assert "--no-index" not in fetch and _value(fetch, "--dest") == [str(cache)]
    assert "--no-index" in copy and _value(copy, "--find-links") == [str(cache)]
    assert _value(copy, "--dest") == [str(tmp_path / "dest")]


def test_abi_follows_the_bases_python(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    fake = FakePip(offline_ok=True)
    monkeypatch.setattr(context, "_pip", fake)
    context.download(["pip"], "3.11", cache / "dest")
    assert {a for args in fake.calls for a in _value(args, "--abi")} == {"cp311"}
    assert {a for args in fake.calls for a in _value(args, "--python-version")} == {"3.11"}


def test_nothing_to_download_runs_no_pip(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    fake = FakePip(offline_ok=True)
    monkeypatch.setattr(context, "_pip", fake)
    context.download([], "3.8", cache / "dest")
    assert fake.calls == []


# Every wheel of a context is locked (images/image-wheels.lock.yaml and cuda-wheels.lock.yaml)

SPEC = spec.load()
IMAGES = catalog.images(SPEC)
EXTRAS = ["nvidia-ml-py", "prometheus-client"]


def _image(
    *, version_pip: tuple[str, ...] = (), cuda: bool = False, tf_keras: bool = False
) -> catalog.Image:
    """2.21.0-gpu (Python 3.11), with the base's CUDA unless `cuda` (then the [and-cuda] wheels),
    without its tf-keras unless `tf_keras`."""
    image = next(i for i in IMAGES if i.name == "2.21.0-gpu")
    req = image.req
    if not cuda:
        req = cudagap.requirements(SPEC, "2.21.0", override=spec.CudaSource.BASE)
    if not tf_keras:
        req = dataclasses.replace(req, tf_keras=None)
    return dataclasses.replace(catalog.with_requirements(SPEC, image, req), version_pip=version_pip)


def _wheel_name(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


class FakeIndex:
    """Stands in for `context.download`: writes a wheel per pin (its content: the pin), plus
    `extra` pins as if a dependency had come along."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.extra = extra
        self.fetched: list[tuple[list[str], str]] = []
        self.without_deps: list[list[str]] = []  # the calls with deps=False
        self.platforms: dict[str, tuple[str, ...]] = {}  # per package, the platforms asked for

    def __call__(
        self,
        packages: list[str],
        python: str,
        dest: Path,
        *,
        deps: bool = True,
        platforms: tuple[str, ...] = context.WHEEL_PLATFORMS,
    ) -> None:
        if not packages:  # as context.download: nothing to fetch, no pip run
            return
        self.platforms.update({pin: tuple(platforms) for pin in packages})
        if deps:
            self.fetched.append((list(packages), python))
        else:
            self.without_deps.append(list(packages))
        dest.mkdir(parents=True, exist_ok=True)
        came_along = self.extra if deps and packages[0] != "pip==25.3" else ()
        for pin in [*packages, *came_along]:
            (dest / _wheel_name(pin)).write_bytes(pin.encode())


def _entry(pin: str) -> wheel_locks.PinnedFile:
    return wheel_locks.PinnedFile(
        file=_wheel_name(pin), sha256=hashlib.sha256(pin.encode()).hexdigest()
    )


def _image_lock(
    packages: list[str], pins: list[str], python: str = "3.11"
) -> wheel_locks.ImageLock:
    pip = wheel_locks.PipWheel(pin="pip==25.3", **_entry("pip==25.3").model_dump())
    wheel_set = wheel_locks.WheelSet(packages=packages, wheels={p: _entry(p) for p in pins})
    return wheel_locks.ImageLock(
        pythons={python: wheel_locks.PythonWheels(pip=pip, sets=[wheel_set])}
    )


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    wheel = tmp_path / "tfgpu-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"runtime")
    return wheel


LOCKED = ["nvidia-ml-py==13.615.71", "prometheus-client==0.26.0", "rich==14.0.0", "mdurl==0.1.2"]


def _assemble(
    image: catalog.Image,
    tmp_path: Path,
    runtime: Path,
    images_lock: wheel_locks.ImageLock,
    cuda_lock: wheel_locks.Lock | None = None,
) -> context.Context:
    return context.assemble(
        image,
        "FROM x\n",
        tmp_path / "ctx",
        runtime_wheel=runtime,
        runtime_extras=EXTRAS,
        lock=cuda_lock if cuda_lock is not None else wheel_locks.Lock(),
        images_lock=images_lock,
    )


def test_context_downloads_exactly_the_locked_pins(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extras and the image's pip packages come as the lock resolved them (dependencies
    included), pip as the lock's pip wheel; requirements.txt pins them all."""
    index = FakeIndex()
    monkeypatch.setattr(context, "download", index)
    image = _image(version_pip=("rich",))
    ctx = _assemble(image, tmp_path, runtime, _image_lock([*EXTRAS, "rich"], LOCKED))
    assert index.fetched == [(LOCKED, "3.11"), (["pip==25.3"], "3.11")]
    assert ctx.requirements == sorted([*LOCKED, "tfgpu==0.1.0"])
    wheels = ctx.path / "wheels"
    assert (wheels / "pip.whl").read_bytes() == b"pip==25.3"
    assert not (ctx.path / "pip-download").exists()
    # each pin with its wheel's sha256, for pip's --require-hashes: the locked ones
    # as locked, the runtime wheel (built on the host, in no lock) hashed at assembly
    lines = (wheels / "requirements.txt").read_text().splitlines()
    assert [line.split(" --hash=")[0] for line in lines] == ctx.requirements
    for line in lines:
        pin, _, digest = line.partition(" --hash=sha256:")
        assert digest == lock_file.sha256(context.wheel_for(pin, wheels)), line
    assert f"tfgpu==0.1.0 --hash=sha256:{hashlib.sha256(b'runtime').hexdigest()}" in lines


def test_an_unlocked_package_set_is_refused_naming_it(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = FakeIndex()
    monkeypatch.setattr(context, "download", index)
    image = _image(version_pip=("keras-tuner==1.4.7",))
    with pytest.raises(SpecError) as info:
        _assemble(image, tmp_path, runtime, _image_lock(EXTRAS, LOCKED[:2]))
    assert str(info.value.message) == (
        "image-wheels.lock.yaml: no entry for Python 3.11 with keras-tuner==1.4.7, nvidia-ml-py,"
        " prometheus-client (image 2.21.0-gpu)"
    )
    assert info.value.hint is not None and "build.py lock" in info.value.hint
    assert index.fetched == []  # refused before anything is downloaded
    with pytest.raises(SpecError, match=r"no entry for Python 3\.11 with nvidia-ml-py"):
        _assemble(_image(), tmp_path, runtime, _image_lock(EXTRAS, LOCKED[:2], python="3.8"))


def test_other_bytes_than_the_locked_ones_are_refused(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(context, "download", FakeIndex())
    lock = _image_lock(EXTRAS, LOCKED[:2])
    tampered = (
        lock.pythons["3.11"].sets[0].wheels[LOCKED[1]].model_copy(update={"sha256": "0" * 64})
    )
    lock.pythons["3.11"].sets[0].wheels[LOCKED[1]] = tampered
    with pytest.raises(SpecError, match=r"prometheus-client==0\.26\.0: .* is not the locked wheel"):
        _assemble(_image(), tmp_path, runtime, lock)


def test_a_wheel_no_lock_names_is_refused(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dependency that came along but is not in the lock (the index changed a package's
    requirements): refused, naming it."""
    monkeypatch.setattr(context, "download", FakeIndex(extra=("six==1.17.0",)))
    with pytest.raises(SpecError, match=r"holds wheels no lock names: six==1\.17\.0"):
        _assemble(_image(), tmp_path, runtime, _image_lock(EXTRAS, LOCKED[:2]))


def test_context_holds_the_locked_cuda_wheels(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image whose base lacks CUDA gets the [and-cuda] wheels in its context, each checked
    against the CUDA lock; their unpacked size (from the lock) is its extra budget."""
    image = _image(cuda=True)
    assert image.gap.wheels
    index = FakeIndex()
    monkeypatch.setattr(context, "download", index)
    entries = {}
    for pin in image.gap.wheels:
        file = tmp_path / _wheel_name(pin)
        file.write_bytes(pin.encode())
        entries[pin] = wheel_locks.describe(file, 1000)
    images_lock = _image_lock(EXTRAS, LOCKED[:2])

    ctx = _assemble(image, tmp_path, runtime, images_lock, wheel_locks.Lock(wheels=entries))
    # the image's own set, then the CUDA wheels: each with the platforms its lock was made for
    assert index.fetched[:2] == [(LOCKED[:2], "3.11"), (list(image.gap.wheels), "3.11")]
    assert index.platforms[LOCKED[0]] == context.IMAGE_WHEEL_PLATFORMS
    assert index.platforms[image.gap.wheels[0]] == context.WHEEL_PLATFORMS
    assert ctx.cuda_wheels_bytes == 1000 * len(image.gap.wheels)
    assert set(image.gap.wheels) <= set(ctx.requirements)
    tampered = dict(entries)
    first = image.gap.wheels[0]
    tampered[first] = entries[first].model_copy(update={"sha256": "0" * 64})
    with pytest.raises(SpecError, match=f"{re.escape(first)}: .* is not the locked wheel"):
        _assemble(image, tmp_path, runtime, images_lock, wheel_locks.Lock(wheels=tampered))


def test_tf_keras_comes_alone_and_locked(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tf-keras (TensorFlow 2.16+) is fetched without its one dependency, TensorFlow (the base
    has it; a second copy would be 600 MB in the context), checked against the lock, pinned by
    hash in requirements.txt, and its unpacked size counts in the image's budget."""
    image = _image(tf_keras=True)
    assert image.tf_keras == "tf-keras==2.21.0"
    # a dependency that would come along with deps: it must not (FakeIndex adds it only then)
    index = FakeIndex(extra=("tensorflow==2.21.0",))
    monkeypatch.setattr(context, "download", index)
    file = tmp_path / _wheel_name(image.tf_keras)
    file.write_bytes(image.tf_keras.encode())
    lock = wheel_locks.Lock(wheels={image.tf_keras: wheel_locks.describe(file, 6_400_512)})
    images_lock = _image_lock(EXTRAS, LOCKED[:2])
    with pytest.raises(SpecError, match=r"holds wheels no lock names: tensorflow==2\.21\.0"):
        _assemble(image, tmp_path, runtime, images_lock, lock)  # the extras' call brings it
    index = FakeIndex()
    monkeypatch.setattr(context, "download", index)
    ctx = _assemble(image, tmp_path, runtime, images_lock, lock)
    assert index.without_deps == [["tf-keras==2.21.0"]]
    assert "tf-keras==2.21.0" in ctx.requirements
    assert ctx.tf_keras_bytes == 6_400_512 and ctx.cuda_wheels_bytes == 0
    lines = (ctx.path / "wheels" / "requirements.txt").read_text().splitlines()
    digest = hashlib.sha256(b"tf-keras==2.21.0").hexdigest()
    assert f"tf-keras==2.21.0 --hash=sha256:{digest}" in lines
    tampered = {image.tf_keras: lock.wheels[image.tf_keras].model_copy(update={"sha256": "0" * 64})}
    with pytest.raises(SpecError, match=r"tf-keras==2\.21\.0: .* is not the locked wheel"):
        _assemble(image, tmp_path, runtime, images_lock, wheel_locks.Lock(wheels=tampered))
    with pytest.raises(SpecError, match=r"no entry for tf-keras==2\.21\.0"):
        _assemble(image, tmp_path, runtime, images_lock, wheel_locks.Lock())


def test_the_committed_image_lock_covers_every_image() -> None:
    """`build.py lock --check` would pass: each base Python has pip and the extras' set; each
    locked pin names its file."""
    lock = wheel_locks.load_images()
    assert lock_refresh.missing_images(SPEC, lock) == []
    assert set(lock.pythons) == {image.base_python for image in IMAGES}
    for entry in lock.pythons.values():
        assert entry.pip.pin.startswith("pip==")
        for wheel_set in entry.sets:
            for pin, file in wheel_set.wheels.items():
                name, _, version = pin.partition("==")
                assert file.file.startswith(f"{name.replace('-', '_')}-{version}-"), pin


def test_a_new_package_makes_the_lock_incomplete(tmp_path: Path) -> None:
    lock = wheel_locks.load_images()
    wheel_locks.write_images(lock, tmp_path)
    assert wheel_locks.load_images(tmp_path) == lock  # what write writes, load reads
    changed = SPEC.model_copy(
        update={"images": SPEC.images.model_copy(update={"runtime_extras": [*EXTRAS, "rich"]})}
    )
    assert lock_refresh.missing_images(changed, lock) == [
        "Python 3.8: nvidia-ml-py, prometheus-client, rich",
        "Python 3.11: nvidia-ml-py, prometheus-client, rich",
        # the slim images' sets (each with its TensorFlow) gain it too
        *(
            f"Python 3.11: nvidia-ml-py, prometheus-client, rich, tensorflow=={v}"
            for v in ("2.21.0", "2.20.0", "2.19.0", "2.18.0", "2.15.0")
        ),
    ]


def test_resolve_asks_the_index_and_fills_the_cache(
    monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    """`build.py lock` resolves afresh (not from the cache, which may hold older releases)."""
    calls: list[list[str]] = []

    def fake_pip(args: list[str], what: str) -> None:
        calls.append(args)
        dest = Path(_value(args, "--dest")[0])
        for pin in ("prometheus_client-0.21.1", "pip-25.0.1"):
            (dest / f"{pin}-py3-none-any.whl").write_bytes(b"x")

    monkeypatch.setattr(context, "_pip", fake_pip)
    wheels = context.resolve(["prometheus-client"], "3.8")
    ((args,),) = [calls]
    assert "--no-index" not in args and "--find-links" not in args
    assert _value(args, "--abi") == ["cp38"] and args[-1] == "prometheus-client"
    assert [w.parent for w in wheels] == [cache, cache]
    assert [context.pin_of(w) for w in wheels] == ["pip==25.0.1", "prometheus-client==0.21.1"]

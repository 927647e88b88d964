"""Device memory: accounting, out of memory, copies, the runtime's allocations, the ledger
shared by processes, and the allocation log."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

import fakegpu
from tests.fakegpu.conftest import GIB, MIB, Runner

ONE_GIB_CARD = {"FAKEGPU_MEMORY_MIB": "1024"}


def test_alloc_until_out_of_memory_then_free_makes_room(run: Runner) -> None:
    out = run(
        r"""
import pynvml
cu.cuInit(0); ctx(); pynvml.nvmlInit()
out["start"] = [meminfo(), nvml_used()]
ptrs = []
for i in range(5):
    r, p = alloc(256 << 20)
    out.setdefault("results", []).append(r)
    if r == 0: ptrs.append(p)
out["full"] = [meminfo(), nvml_used()]
out["free"] = free(ptrs[1])
out["double_free"] = free(ptrs[1])
out["not_a_pointer"] = free(ptrs[0] + 512)
out["after_free"] = [meminfo(), nvml_used()]
out["again"] = alloc(200 << 20)[0]
out["too_big"] = alloc((1 << 30) + 1)[0]
out["zero"] = alloc(0)[0]
out["aligned"] = [p % 256 == 0 for p in ptrs] + [alloc(1000)[1] % 256 == 0]
out["distinct"] = len(set(ptrs)) == len(ptrs)
""",
        ONE_GIB_CARD,
    ).out
    assert out["start"] == [[GIB, GIB], [0, GIB, GIB]]
    assert out["results"] == [0, 0, 0, 0, 2]  # the 5th 256 MiB: CUDA_ERROR_OUT_OF_MEMORY
    assert out["full"] == [[0, GIB], [GIB, 0, GIB]]  # cuMemGetInfo and NVML agree
    assert out["free"] == 0
    assert out["after_free"] == [[256 * MIB, GIB], [768 * MIB, 256 * MIB, GIB]]
    assert out["again"] == 0
    assert out["double_free"] == out["not_a_pointer"] == 1  # CUDA_ERROR_INVALID_VALUE
    assert out["too_big"] == 2
    assert out["zero"] == 1
    assert all(out["aligned"]) and out["distinct"]


def test_allocating_needs_a_current_context(run: Runner) -> None:
    out = run(
        "cu.cuInit(0); out['no_ctx'] = alloc(1024)[0]; ctx(); out['ctx'] = alloc(1024)[0]\n"
    ).out
    assert out == {"no_ctx": 201, "ctx": 0}  # CUDA_ERROR_INVALID_CONTEXT, then fine


def test_the_runtime_allocates_through_the_same_accounting(run: Runner) -> None:
    out = run(
        r"""
p = c_void_p()
out["malloc"] = rt.cudaMalloc(byref(p), c_size_t(300 << 20))
out["info"] = meminfo()  # cudaMalloc made the primary context current, as cudart does
out["driver_alloc"] = alloc(800 << 20)[0]
q = c_void_p()
out["runtime_oom"] = rt.cudaMalloc(byref(q), c_size_t(800 << 20))
rt.cudaGetErrorString.restype = c_char_p
out["oom_text"] = rt.cudaGetErrorString(out["runtime_oom"]).decode()
out["last"] = [rt.cudaGetLastError(), rt.cudaGetLastError()]
out["free"] = rt.cudaFree(p)
out["free_null"] = rt.cudaFree(None)
out["after"] = meminfo()
f, t = c_size_t(), c_size_t()
rt.cudaMemGetInfo(byref(f), byref(t))
out["rt_info"] = [f.value, t.value]
d = c_int(); rt.cudaGetDevice(byref(d)); out["device"] = d.value
n = c_int(); rt.cudaGetDeviceCount(byref(n)); out["count"] = n.value
""",
        ONE_GIB_CARD,
    ).out
    assert out["malloc"] == 0
    assert out["info"] == [724 * MIB, GIB]
    assert out["driver_alloc"] == 2
    assert out["runtime_oom"] == 2  # cudaErrorMemoryAllocation
    assert out["oom_text"] == "out of memory"
    assert out["last"] == [2, 0]  # cudaGetLastError reports, then resets
    assert out["free"] == 0 and out["free_null"] == 0
    assert out["after"] == out["rt_info"] == [GIB, GIB]
    assert out["device"] == 0 and out["count"] == 1


def test_copies_move_nothing_to_the_device_and_bring_zeros_back(run: Runner) -> None:
    out = run(
        r"""
cu.cuInit(0); ctx()
r, dev = alloc(4096)
host = ctypes.create_string_buffer(b"\xab" * 64, 64)
out["htod"] = cu.cuMemcpyHtoD_v2(c_ulonglong(dev), host, c_size_t(64))
out["memset"] = cu.cuMemsetD32_v2(c_ulonglong(dev), c_uint(0xFFFFFFFF), c_size_t(16))
out["dtoh"] = cu.cuMemcpyDtoH_v2(host, c_ulonglong(dev), c_size_t(32))
out["host"] = host.raw.hex()
host2 = ctypes.create_string_buffer(b"\xcd" * 16, 16)
s = c_void_p(); cu.cuStreamCreate(byref(s), 0)
to = c_ulonglong(ctypes.addressof(host2))
out["async"] = cu.cuMemcpyAsync(to, c_ulonglong(dev), c_size_t(16), s)
out["sync"] = cu.cuStreamSynchronize(s)
out["host2"] = host2.raw.hex()
pinned = c_void_p()
out["pinned"] = cu.cuMemHostAlloc(byref(pinned), c_size_t(1 << 20), 0)
ctypes.memset(pinned, 0x5A, 1 << 20)  # real host memory: writable
src = ctypes.create_string_buffer(b"hello", 5)
cu.cuMemcpy(c_ulonglong(pinned.value), c_ulonglong(ctypes.addressof(src)), c_size_t(5))
out["pinned_bytes"] = ctypes.string_at(pinned.value, 6).decode()
out["pinned_not_device_memory"] = meminfo()[0] == (16 << 30) - 4096
mt = c_uint(); cu.cuPointerGetAttribute(byref(mt), 2, c_ulonglong(dev)); out["type_dev"] = mt.value
cu.cuPointerGetAttribute(byref(mt), 2, c_ulonglong(pinned.value)); out["type_host"] = mt.value
o = c_int(); cu.cuPointerGetAttribute(byref(o), 9, c_ulonglong(dev + 100)); out["ordinal"] = o.value
base, size = c_ulonglong(), c_size_t()
cu.cuMemGetAddressRange_v2(byref(base), byref(size), c_ulonglong(dev + 100))
out["range"] = [base.value == dev, size.value]
out["free_host"] = cu.cuMemFreeHost(pinned)
""",
    ).out
    assert out["htod"] == out["memset"] == out["dtoh"] == out["async"] == out["sync"] == 0
    assert out["host"] == "00" * 32 + "ab" * 32  # 32 bytes copied back: zeros
    assert out["host2"] == "00" * 16
    assert out["pinned"] == 0
    assert out["pinned_bytes"] == "helloZ"  # host-to-host copies are real
    assert out["pinned_not_device_memory"]
    assert (out["type_dev"], out["type_host"]) == (2, 1)  # CU_MEMORYTYPE_DEVICE, _HOST
    assert out["ordinal"] == 0
    assert out["range"] == [True, 4096]
    assert out["free_host"] == 0


def test_host_code_dereferencing_a_device_pointer_faults(run: Runner) -> None:
    child = run(
        "cu.cuInit(0); ctx(); r, p = alloc(4096); print('allocated', flush=True)\n"
        "ctypes.string_at(p, 1)\n",
        expect_ok=False,
    )
    assert child.returncode == -signal.SIGSEGV


def test_host_callbacks_run_and_events_complete(run: Runner) -> None:
    out = run(
        r"""
import threading
cu.cuInit(0); ctx()
s = c_void_p(); cu.cuStreamCreate(byref(s), 0)
seen = []
CB = ctypes.CFUNCTYPE(None, c_void_p)
cb = CB(lambda user: seen.append(threading.current_thread() is threading.main_thread()))
e = c_void_p(); cu.cuEventCreate(byref(e), 0)
out["launch"] = cu.cuLaunchHostFunc(s, cb, None)
out["record"] = cu.cuEventRecord(e, s)
out["esync"] = cu.cuEventSynchronize(e)
out["query"] = cu.cuEventQuery(e)
out["seen"] = seen
""",
    ).out
    assert out == {"launch": 0, "record": 0, "esync": 0, "query": 0, "seen": [False]}


HOLD = r"""
import sys
cu.cuInit(0); ctx()
r, p = alloc(int(sys.argv[1]) if len(sys.argv) > 1 else 3 << 30)
print(json.dumps({"alloc": r, "pid": os.getpid()}), flush=True)
sys.stdin.read()
"""

READ = r"""
import pynvml
cu.cuInit(0); ctx(); pynvml.nvmlInit()
out["info"] = meminfo()
out["nvml"] = nvml_used()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
out["procs"] = [[p.pid, p.usedGpuMemory] for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
out["oom"] = alloc(2 << 30)[0]
out["fits"] = alloc(1 << 30)[0]
"""


def test_processes_sharing_a_ledger_share_one_card(
    run: Runner, spawn: Callable[..., Popen[str]], tmp_path: Path
) -> None:
    env = {"FAKEGPU_MEMORY_MIB": "4096", "FAKEGPU_LEDGER": str(tmp_path / "ledger")}
    holder = spawn(HOLD, env)
    try:
        assert holder.stdout is not None
        held = json.loads(holder.stdout.readline())
        assert held["alloc"] == 0
        out = run(READ, env).out
        assert out["info"] == [1 * GIB, 4 * GIB]  # the other process's 3 GiB count
        assert out["nvml"] == [3 * GIB, 1 * GIB, 4 * GIB]
        assert out["procs"] == [[held["pid"], 3 * GIB]]
        assert out["oom"] == 2  # 3 + 2 > 4 GiB on the card, though this process holds nothing
        assert out["fits"] == 0
    finally:
        holder.communicate("", timeout=10)  # closes stdin: the holder exits
    assert holder.returncode == 0
    after = run(READ, env).out
    assert after["info"] == [4 * GIB, 4 * GIB]  # its entry left with it
    assert list((tmp_path / "ledger").glob("*.live")) == []
    # shared by containers running as different users (root servers, a uid-1000 kernel), whatever
    # the umask of the process that made them
    assert (tmp_path / "ledger").stat().st_mode & 0o7777 == 0o1777
    # flock needs only a read-only descriptor: nobody writes the lock, so not 0666
    assert (tmp_path / "ledger" / "ledger.lock").stat().st_mode & 0o777 == 0o444
    alone = run(READ, {"FAKEGPU_MEMORY_MIB": "4096"}).out  # no ledger: this process alone
    assert alone["info"] == [4 * GIB, 4 * GIB]


def test_a_killed_process_does_not_hold_memory_in_the_ledger(
    run: Runner, spawn: Callable[..., Popen[str]], tmp_path: Path
) -> None:
    env = {"FAKEGPU_MEMORY_MIB": "4096", "FAKEGPU_LEDGER": str(tmp_path / "ledger")}
    holder = spawn(HOLD, env)
    assert holder.stdout is not None
    assert json.loads(holder.stdout.readline())["alloc"] == 0
    assert len(list((tmp_path / "ledger").glob("*.live"))) == 1
    holder.kill()  # no clean-up: its file stays, but its lock is gone
    holder.communicate(timeout=10)
    out = run(READ, env).out
    assert out["info"] == [4 * GIB, 4 * GIB]
    assert list((tmp_path / "ledger").glob("*.live")) == []  # the stale entry was dropped


def test_the_ledger_counts_a_card_by_uuid_whatever_cuda_calls_it(
    run: Runner, spawn: Callable[..., Popen[str]], tmp_path: Path
) -> None:
    env = {"FAKEGPU_MEMORY_MIB": "4096,8192", "FAKEGPU_LEDGER": str(tmp_path / "ledger")}
    holder = spawn(HOLD, {**env, "CUDA_VISIBLE_DEVICES": "1"})  # card 1 is its device 0
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline())["alloc"] == 0
        out = run(
            "cu.cuInit(0); ctx(1); out['info1'] = meminfo(); ctx(0); out['info0'] = meminfo()\n"
            "import pynvml; pynvml.nvmlInit(); out['nvml1'] = nvml_used(1)[0]\n",
            env,
        ).out
        assert out["info1"] == [5 * GIB, 8 * GIB]
        assert out["info0"] == [4 * GIB, 4 * GIB]
        assert out["nvml1"] == 3 * GIB
    finally:
        holder.communicate("", timeout=10)


def test_the_log_has_one_json_line_per_alloc_free_and_refusal(run: Runner, tmp_path: Path) -> None:
    log = tmp_path / "fakegpu.jsonl"
    env = {**ONE_GIB_CARD, "FAKEGPU_LOG": str(log)}
    out = run(
        "cu.cuInit(0); ctx(); r, p = alloc(600 << 20); alloc(600 << 20); free(p)\n"
        "q = c_void_p(); rt.cudaMalloc(byref(q), c_size_t(1 << 20)); out['pid'] = os.getpid()\n",
        env,
    ).out
    run("cu.cuInit(0); ctx(); alloc(4096)\n", env)  # a second process appends to the same file
    events = fakegpu.read_log(log)
    assert [(e["event"], e["api"], e["bytes"]) for e in events] == [
        ("alloc", "cuMemAlloc_v2", 600 * MIB),
        ("oom", "cuMemAlloc_v2", 600 * MIB),
        ("free", "cuMemFree_v2", 600 * MIB),
        ("alloc", "cudaMalloc", 1 * MIB),
        ("alloc", "cuMemAlloc_v2", 4096),
    ]
    first = events[0]
    assert set(first) == {
        "time",
        "token",
        "pid",
        "event",
        "api",
        "device",
        "ordinal",
        "uuid",
        "bytes",
        "ptr",
        "process_live",
        "device_live",
        "total",
    }
    assert first["pid"] == out["pid"] and first["device"] == 0 and first["ordinal"] == 0
    assert first["uuid"] == "GPU-fa6e0000-0000-4000-8000-000000000000"
    assert first["total"] == GIB
    assert isinstance(first["ptr"], str) and first["ptr"].startswith("0x")
    assert events[1]["ptr"] is None  # refused: no pointer
    assert events[2]["ptr"] == first["ptr"]
    assert [e["process_live"] for e in events] == [600 * MIB, 600 * MIB, 0, MIB, 4096]
    assert len({e["token"] for e in events[:4]}) == 1 and events[4]["token"] != first["token"]

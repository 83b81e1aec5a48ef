"""``torch.cuda``: whether a GPU is there, and the seeding and memory calls scripts make either way.

tinyattn reaches NVIDIA GPUs through CuPy (``device="cuda"``), never through CUDA kernels of its
own. ``is_available()`` says whether CuPy is installed and sees a device; where it is not,
``manual_seed``, ``seed`` and the ``reset_*`` calls do nothing, the memory counters are 0 and the
statistics empty, as torch's are on a machine without CUDA, and the calls that need a GPU raise a
``RuntimeError`` saying so. With a GPU, the memory counters are CuPy's memory pool's (it keeps no
peaks: ``max_memory_*`` are refused there). Streams, events, CUDA graphs, the caching allocator's
controls, NVML's readings and the legacy tensor types are refused: compat runs on CuPy's current
stream and allocator.

>>> import tinyattn.compat as torch
>>> torch.cuda.is_available() == (torch.cuda.device_count() > 0)
True
>>> torch.cuda.manual_seed_all(0)
>>> torch.cuda.memory_allocated() if not torch.cuda.is_available() else 0
0
"""

import collections
import contextlib
import os
import types

from ... import backend
from ..core.devices import device_count, is_available  # noqa: F401
from ..refusals import refused
from ..scope import missing
from . import amp  # noqa: F401


def _needs_a_gpu(name):
    if not is_available():
        raise RuntimeError(f"torch.cuda.{name}: no CUDA GPU is available here (tinyattn reaches GPUs through "
                           "CuPy: pip install 'tinyattn[cuda]'); run on device='cpu'")


def manual_seed(seed):
    """Seed the GPU's random stream; without a GPU, nothing (as torch does without CUDA)."""
    if is_available():
        backend.manual_seed(seed)


manual_seed_all = manual_seed


def is_bf16_supported(including_emulation=True):
    """Always ``False``: NumPy and CuPy have no bfloat16."""
    return False


def current_device():
    _needs_a_gpu("current_device")
    return 0


def set_device(device):
    _needs_a_gpu("set_device")


def synchronize(device=None):
    _needs_a_gpu("synchronize")
    import cupy

    cupy.cuda.get_current_stream().synchronize()


def empty_cache():
    """Return cached GPU memory to the driver (nothing to do without a GPU, as in torch)."""
    if is_available():
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()


def get_device_name(device=None):
    _needs_a_gpu("get_device_name")
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


# ----------------------------------------------------------------------------- what holds without a GPU too


has_half, has_magma = True, False
default_generators = ()


class CudaError(RuntimeError):
    """torch's error of a failed CUDA call."""


class DeferredCudaCallError(Exception):
    """torch's error of a CUDA call queued before initialisation that then failed."""


def is_initialized():
    """Whether the GPU is in use: ``False`` without one, as in torch."""
    return is_available()


def init():
    _needs_a_gpu("init")


def seed():
    """Seed the GPU's random stream afresh; without a GPU, nothing (as torch does without CUDA)."""
    if is_available():
        backend.manual_seed(int.from_bytes(os.urandom(4), "little"))


seed_all = seed


def get_arch_list():
    """The CUDA architectures compat's own kernels are built for: none (CuPy compiles its own)."""
    return []


def get_gencode_flags():
    return ""


def is_tf32_supported():
    return False


def is_current_stream_capturing():
    """``False``: no CUDA graph is ever being captured here."""
    return False


def _pool():
    import cupy

    return cupy.get_default_memory_pool()


def memory_allocated(device=None):
    """Bytes held by tensors on the GPU (CuPy's memory pool's used bytes); 0 without a GPU, as in torch."""
    return _pool().used_bytes() if is_available() else 0


def memory_reserved(device=None):
    """Bytes the GPU's memory pool holds (used or cached); 0 without a GPU, as in torch."""
    return _pool().total_bytes() if is_available() else 0


memory_cached = memory_reserved


def _peak(name):
    def peak(device=None):
        if is_available():
            raise NotImplementedError(f"torch.cuda.{name} is not supported by tinyattn.compat: CuPy's memory pool "
                                      "keeps no peak; read memory_allocated() / memory_reserved() where you need it")
        return 0

    peak.__name__ = name
    peak.__doc__ = "0 without a GPU, as in torch; with one, refused (CuPy's memory pool keeps no peak)."
    return peak


max_memory_allocated = _peak("max_memory_allocated")
max_memory_reserved = _peak("max_memory_reserved")
max_memory_cached = _peak("max_memory_cached")


def memory_stats(device=None):
    """The memory counters, by torch's keys (the current ones alone, from CuPy's pool); empty without a GPU."""
    if not is_available():
        return collections.OrderedDict()
    return collections.OrderedDict([("allocated_bytes.all.current", memory_allocated()),
                                    ("reserved_bytes.all.current", memory_reserved())])


def memory_stats_as_nested_dict(device=None):
    stats = memory_stats(device)
    nested = {}
    for key, value in stats.items():
        node = nested
        *path, last = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def host_memory_stats():
    return collections.OrderedDict()


def host_memory_stats_as_nested_dict():
    return {}


def _nothing_to_reset(name):
    def reset(device=None):
        return None

    reset.__name__ = name
    reset.__doc__ = "Nothing to reset: compat keeps no peak or accumulated counters."
    return reset


reset_peak_memory_stats = _nothing_to_reset("reset_peak_memory_stats")
reset_max_memory_allocated = _nothing_to_reset("reset_max_memory_allocated")
reset_max_memory_cached = _nothing_to_reset("reset_max_memory_cached")
reset_accumulated_memory_stats = _nothing_to_reset("reset_accumulated_memory_stats")
reset_peak_host_memory_stats = _nothing_to_reset("reset_peak_host_memory_stats")
reset_accumulated_host_memory_stats = _nothing_to_reset("reset_accumulated_host_memory_stats")


def get_device_properties(device=None):
    """The GPU's name, total memory, compute capability and multiprocessor count (CuPy's reading)."""
    _needs_a_gpu("get_device_properties")
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(0)
    return types.SimpleNamespace(name=p["name"].decode(), total_memory=p["totalGlobalMem"], major=p["major"],
                                 minor=p["minor"], multi_processor_count=p["multiProcessorCount"])


def get_device_capability(device=None):
    properties = get_device_properties(device)
    return properties.major, properties.minor


def mem_get_info(device=None):
    """``(free, total)`` bytes of the GPU."""
    _needs_a_gpu("mem_get_info")
    import cupy

    return cupy.cuda.runtime.memGetInfo()


def ipc_collect():
    _needs_a_gpu("ipc_collect")


def initial_seed():
    """The last seed the library's generators took (``manual_seed``), with a GPU."""
    _needs_a_gpu("initial_seed")
    return backend.get_rng_state()["seed"]


def get_rng_state_all():
    """The GPUs' random states: none without a GPU (as in torch); with one, refused (see ``get_rng_state``)."""
    return [get_rng_state()] if is_available() else []


def set_rng_state_all(new_states):
    for state in new_states:
        set_rng_state(state)


def can_device_access_peer(device, peer_device):
    """``False``: compat uses one GPU."""
    _needs_a_gpu("can_device_access_peer")
    return False


class device(contextlib.AbstractContextManager):
    """``with torch.cuda.device(i):``: the GPU ``i`` (compat uses GPU 0); ``None`` or a negative index: nothing."""

    def __init__(self, device):
        if device is None:
            self.idx = -1
        elif isinstance(device, str):  # compat's devices are their names: "cuda", "cuda:0", "cpu"
            self.idx = int(device.partition(":")[2] or 0) if device.startswith("cuda") else -1
        else:
            self.idx = int(device)

    def __enter__(self):
        if self.idx >= 0:
            _needs_a_gpu("device")
            if self.idx != 0:
                raise RuntimeError(f"torch.cuda.device({self.idx}): compat uses GPU 0 alone")
        return self

    def __exit__(self, *exc):
        return False


def device_of(obj):
    """``device`` of the tensor ``obj``'s GPU, or a context that does nothing for a host tensor."""
    return device(0 if getattr(obj, "is_cuda", False) else -1)


# ----------------------------------------------------------------------------- refused

_STREAMS = "compat runs every operation on CuPy's current stream; it has no stream or event objects"
_ALLOCATOR = "compat allocates through CuPy's memory pool, which it does not expose; use empty_cache()"
_NVML = "compat reads no NVML counters; run nvidia-smi"
_LEGACY = "the legacy typed tensors are not kept; use torch.tensor(data, dtype=..., device='cuda')"
_GRAPHS = "compat captures no CUDA graphs; call the model itself"
get_rng_state = refused("torch.cuda.get_rng_state", "the library's generators are one state for every device; use "
                                                    "torch.get_rng_state() / torch.set_rng_state()")
set_rng_state = refused("torch.cuda.set_rng_state", "the library's generators are one state for every device; use "
                                                    "torch.get_rng_state() / torch.set_rng_state()")
memory_summary = refused("torch.cuda.memory_summary", "compat keeps no allocator history; read memory_allocated() "
                                                      "and memory_reserved()")
for _name, _why in [
    ("Stream", _STREAMS), ("Event", _STREAMS), ("ExternalStream", _STREAMS), ("StreamContext", _STREAMS),
    ("stream", _STREAMS), ("current_stream", _STREAMS), ("default_stream", _STREAMS), ("set_stream", _STREAMS),
    ("get_stream_from_external", _STREAMS), ("get_sync_debug_mode", _STREAMS), ("set_sync_debug_mode", _STREAMS),
    ("CUDAGraph", _GRAPHS), ("graph", _GRAPHS), ("make_graphed_callables", _GRAPHS), ("graph_pool_handle", _GRAPHS),
    ("MemPool", _ALLOCATOR), ("use_mem_pool", _ALLOCATOR), ("CUDAPluggableAllocator", _ALLOCATOR),
    ("change_current_allocator", _ALLOCATOR), ("get_allocator_backend", _ALLOCATOR),
    ("caching_allocator_alloc", _ALLOCATOR), ("caching_allocator_delete", _ALLOCATOR),
    ("caching_allocator_enable", _ALLOCATOR), ("caching_allocator_disabled", _ALLOCATOR),
    ("memory_snapshot", _ALLOCATOR), ("set_per_process_memory_fraction", _ALLOCATOR),
    ("get_per_process_memory_fraction", _ALLOCATOR), ("GreenContext", _ALLOCATOR),
    ("clock_rate", _NVML), ("device_memory_used", _NVML), ("memory_usage", _NVML), ("power_draw", _NVML),
    ("temperature", _NVML), ("utilization", _NVML), ("list_gpu_processes", _NVML),
    ("cudart", "compat calls no CUDA runtime itself (CuPy does)"), ("check_error", "compat calls no CUDA runtime"),
    ("cudaStatus", "compat calls no CUDA runtime"), ("current_blas_handle", "compat holds no cuBLAS handle"),
    ("current_solver_handle", "compat holds no cuSOLVER handle"),
    *[(f"{kind}{suffix}", _LEGACY) for kind in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int",
                                                 "Long", "Short") for suffix in ("Tensor", "Storage")],
    ("ComplexDoubleStorage", _LEGACY), ("ComplexFloatStorage", _LEGACY),
]:
    globals()[_name] = refused(f"torch.cuda.{_name}", _why)


def __getattr__(name):
    raise missing(__name__, name)

"""``torch.cuda``: whether a GPU is there, and the seeding calls scripts make either way.

tinyattn reaches NVIDIA GPUs through CuPy (``device="cuda"``), never through CUDA kernels of its
own. ``is_available()`` says whether CuPy is installed and sees a device; where it is not,
``manual_seed`` and ``manual_seed_all`` do nothing, as torch's do on a machine without CUDA, and
the calls that need a GPU raise the error torch raises there.

>>> import tinyattn.compat as torch
>>> torch.cuda.is_available() == (torch.cuda.device_count() > 0)
True
>>> torch.cuda.manual_seed_all(0)
"""

from ... import backend
from ..core.devices import device_count, is_available  # noqa: F401
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


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.cuda has no `{name}` yet")

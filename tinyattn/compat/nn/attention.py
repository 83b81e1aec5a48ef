"""``torch.nn.attention``: ``SDPBackend`` and ``sdpa_kernel``, which choose among torch's attention kernels.
tinyattn has one attention on the CPU (``ta.compile`` picks its fused form), so every backend is accepted and the
choice changes nothing; the flash-attention implementation registry is refused.

>>> import tinyattn.compat as torch
>>> from torch.nn.attention import SDPBackend, sdpa_kernel  # doctest: +SKIP
>>> with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.FLASH_ATTENTION]):
...     out = torch.nn.functional.scaled_dot_product_attention(*[torch.randn(1, 2, 3, 4)] * 3)
>>> out.shape
(1, 2, 3, 4)
"""

import contextlib
import enum

from ..refusals import refused
from ..scope import missing


class SDPBackend(enum.IntEnum):
    """torch's attention kernels, by name (``ERROR``, ``MATH``, ``FLASH_ATTENTION``…)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Accepts torch's backends (one ``SDPBackend`` or a list) and changes nothing: there is one attention here."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for backend in chosen:
        if not isinstance(backend, SDPBackend):
            raise TypeError(f"sdpa_kernel: expected SDPBackend values, got {type(backend).__name__}")
    yield


WARN_FOR_UNFUSED_KERNELS = False
_REGISTRY = "tinyattn has no pluggable flash-attention implementations; F.scaled_dot_product_attention is the one"
register_flash_attention_impl = refused("torch.nn.attention.register_flash_attention_impl", _REGISTRY)
activate_flash_attention_impl = refused("torch.nn.attention.activate_flash_attention_impl", _REGISTRY)
list_flash_attention_impls = refused("torch.nn.attention.list_flash_attention_impls", _REGISTRY)
current_flash_attention_impl = refused("torch.nn.attention.current_flash_attention_impl", _REGISTRY)
restore_flash_attention_impl = refused("torch.nn.attention.restore_flash_attention_impl", _REGISTRY)

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS", "register_flash_attention_impl",
           "activate_flash_attention_impl", "list_flash_attention_impls", "current_flash_attention_impl",
           "restore_flash_attention_impl"]


def __getattr__(name):
    raise missing(__name__, name)

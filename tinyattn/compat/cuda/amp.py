"""``torch.cuda.amp``: the older names of ``torch.amp``'s ``autocast`` and ``GradScaler`` for CUDA."""

import functools

from .. import amp as _amp

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=float16, cache_enabled=True)``: ``torch.autocast("cuda", …)``."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


GradScaler = functools.partial(_amp.GradScaler, "cuda")

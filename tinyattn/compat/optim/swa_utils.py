"""``torch.optim.swa_utils``: the native weight averaging (``ta.optim.swa_utils``): ``AveragedModel``, ``SWALR``,
``update_bn`` and the averaging functions."""

from ...optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    get_swa_avg_fn,
    get_swa_multi_avg_fn,
    update_bn,
)

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]

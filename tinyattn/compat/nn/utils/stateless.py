"""``torch.nn.utils.stateless``: ``functional_call``, torch's older path to ``torch.func.functional_call``.

>>> import tinyattn.compat as torch
>>> layer = torch.nn.Linear(2, 1, bias=False)
>>> torch.nn.utils.stateless.functional_call(layer, {"weight": torch.ones(1, 2)}, (torch.ones(1, 2),))
tensor([[2.]])
"""

from ...func import functional_call  # noqa: F401
from ...scope import missing

__all__ = ["functional_call"]


def __getattr__(name):
    raise missing(__name__, name)

"""``torch.nn.init``: the native ``ta.nn.init``, which follows PyTorch already.

>>> import tinyattn.compat as torch
>>> torch.nn.init.zeros_(torch.ones(2))
tensor([0., 0.])
"""

from ...nn.init import *  # noqa: F401,F403
from ...nn.init import __all__  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.init has no `{name}` yet")

"""``torch.nn.utils.parametrize``: the native ``ta.nn.parametrize``.

>>> import tinyattn.compat as torch
>>> layer = torch.nn.utils.parametrize.register_parametrization(torch.nn.Linear(2, 2), "weight", torch.nn.Identity())
>>> type(layer).__name__, torch.nn.utils.parametrize.is_parametrized(layer)
('ParametrizedLinear', True)
"""

from ....nn.parametrize import *  # noqa: F401,F403
from ....nn.parametrize import __all__  # noqa: F401
from ...scope import missing


def __getattr__(name):
    raise missing(__name__, name)

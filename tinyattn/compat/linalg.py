"""``torch.linalg``: the native ``ta.linalg`` (norms, products, views); decompositions and solvers are out of scope.

>>> import tinyattn.compat as torch
>>> torch.linalg.__name__
'tinyattn.compat.linalg'
"""

from ..linalg import *  # noqa: F401,F403
from ..linalg import __all__  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.linalg has no `{name}` yet")

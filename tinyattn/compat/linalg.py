"""``torch.linalg``: the native ``ta.linalg`` (norms, products, views); decompositions and solvers are out of scope.

>>> import tinyattn.compat as torch
>>> torch.linalg.__name__
'tinyattn.compat.linalg'
"""

from .. import matmul as _matmul
from ..linalg import *  # noqa: F401,F403
from ..linalg import __all__  # noqa: F401
from ..linalg import norm as _norm
from .core.methods import torch_keywords
from .scope import missing

norm = torch_keywords(_norm, input="A")  # torch.linalg.norm(input=…), where vector_norm and matrix_norm take x, A
matmul = torch_keywords(_matmul, input="a", other="b")  # torch.linalg.matmul is torch.matmul


def __getattr__(name):
    raise missing(__name__, name)

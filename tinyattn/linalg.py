"""``ta.linalg``: PyTorch's ``torch.linalg`` names for the norms, products and views the families define.

Decompositions and solvers are not here (out of scope).
"""

from .products import linalg_cross as cross
from .products import matrix_power, multi_dot, vander, vecdot
from .reductions import linalg_norm as norm
from .reductions import matrix_norm, vector_norm
from .shapes import diagonal as _diagonal


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals ``A[…, i, i + offset]`` of a batch of matrices, the last two dimensions by default
    (``ta.diagonal`` with ``torch.linalg``'s defaults).

    >>> import tinyattn as ta
    >>> ta.linalg.diagonal(ta.arange(8).reshape(2, 2, 2))
    tensor([[0, 3],
            [4, 7]])
    """
    return _diagonal(A, offset, dim1, dim2)


__all__ = ["vector_norm", "matrix_norm", "norm", "multi_dot", "vecdot", "matrix_power", "cross", "vander", "diagonal"]

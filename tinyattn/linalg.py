"""``ta.linalg``: PyTorch's ``torch.linalg`` names for the norms, products and views the families define.

Decompositions and solvers are not here (out of scope).
"""

# reductions' norms

# products
from .products import linalg_cross as cross  # noqa: E402
from .products import matrix_power, multi_dot, vander, vecdot  # noqa: E402

# shapes' views

__all__ = []
__all__ += ["multi_dot", "vecdot", "matrix_power", "cross", "vander"]  # products

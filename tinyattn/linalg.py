"""``ta.linalg``: PyTorch's ``torch.linalg`` names for the norms, products and views the families define.

Decompositions and solvers are not here (out of scope).
"""

# reductions' norms
from .reductions import linalg_norm as norm  # noqa: E402
from .reductions import matrix_norm, vector_norm  # noqa: E402

# products

# shapes' views

__all__ = []
__all__ += ["vector_norm", "matrix_norm", "norm"]  # reductions' norms

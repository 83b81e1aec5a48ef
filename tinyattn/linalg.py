"""``ta.linalg``: PyTorch's ``torch.linalg`` names for the norms, products and views the families define.

Decompositions and solvers are not here (out of scope).
"""

# reductions' norms

# products

# shapes' views

__all__ = []

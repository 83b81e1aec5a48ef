"""Floor 3, by family: shape and view ops: moving, splitting, stacking, tiling and rolling dimensions.

Each function is composed from the primitives in ``ops`` wherever the mathematics allows, so that its
gradient, JVP, batching rule and second derivative come from theirs; a new primitive says in its docstring
why a composition would not do. Names, arguments and defaults are PyTorch's.
"""

__all__ = []

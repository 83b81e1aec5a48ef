"""``torch.nn.modules.fold``: folding and unfolding (none yet), the classes of ``compat.nn`` at PyTorch's path."""

__all__ = []


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.fold has no `{name}` yet")

"""``torch.nn.modules.lazy``: the lazy modules' mixin (none yet), the classes of ``compat.nn`` at PyTorch's path."""

__all__ = []


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.lazy has no `{name}` yet")

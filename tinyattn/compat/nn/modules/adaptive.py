"""``torch.nn.modules.adaptive``: the adaptive softmax (none yet), the classes of ``compat.nn`` at PyTorch's path."""

__all__ = []


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.adaptive has no `{name}` yet")

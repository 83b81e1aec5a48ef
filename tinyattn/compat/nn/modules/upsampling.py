"""``torch.nn.modules.upsampling``: upsampling (none yet), the classes of ``compat.nn`` at PyTorch's path."""

__all__ = []


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.upsampling has no `{name}` yet")

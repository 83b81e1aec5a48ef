"""``torch.nn.modules.container``: the containers, the classes of ``compat.nn`` at PyTorch's path."""

from .. import Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.nn.modules.container has no `{name}` yet")

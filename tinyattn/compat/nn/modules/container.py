"""``torch.nn.modules.container``: the containers, the classes of ``compat.nn`` at PyTorch's path."""

from ...scope import missing
from .. import Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]


def __getattr__(name):
    raise missing(__name__, name)

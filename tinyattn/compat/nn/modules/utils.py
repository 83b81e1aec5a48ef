"""``torch.nn.modules.utils``: the tuple helpers layers use for their size arguments (``_pair(3) == (3, 3)``), and
``consume_prefix_in_state_dict_if_present``."""

import collections.abc
from itertools import repeat

from ...scope import missing

__all__ = ["consume_prefix_in_state_dict_if_present"]


def _ntuple(n, name="parse"):
    """A function that repeats a single value ``n`` times and passes an iterable through as a tuple."""

    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """``t`` reversed, each element repeated ``n`` times: the ``F.pad`` form of a per-dimension padding."""
    return tuple(x for x in reversed(t) for _ in range(n))


def consume_prefix_in_state_dict_if_present(state_dict, prefix):
    """Strips ``prefix`` from every key of ``state_dict`` that starts with it, in place (as PyTorch does for a
    ``DataParallel`` model's ``"module."``); the ``_metadata`` of an ``OrderedDict`` too, where it has one."""
    keys = list(state_dict.keys())
    for key in keys:
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)


def __getattr__(name):
    raise missing(__name__, name)

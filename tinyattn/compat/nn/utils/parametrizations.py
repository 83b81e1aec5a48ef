"""``torch.nn.utils.parametrizations``: ``weight_norm`` and ``spectral_norm``, the native ones
(``ta.nn.parametrizations``); ``orthogonal`` is refused (it needs the matrix exponential or a QR decomposition with
gradients, which tinyattn does not differentiate).

>>> import tinyattn.compat as torch
>>> sorted(torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 2)).state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""

from ....nn.parametrizations import spectral_norm, weight_norm  # noqa: F401
from ...refusals import refused
from ...scope import missing

orthogonal = refused("torch.nn.utils.parametrizations.orthogonal",
                     "it differentiates a matrix exponential or a QR decomposition, which tinyattn does not; "
                     "initialise with nn.init.orthogonal_ instead")

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def __getattr__(name):
    raise missing(__name__, name)

"""``torch.backends``: the flags scripts set for cuDNN, TF32 and Apple's MPS.

compat runs no cuDNN or TF32 kernels, so the flags change nothing here; they hold what a script
sets, as torch's do on a machine without those kernels.

>>> import tinyattn.compat as torch
>>> torch.backends.cudnn.benchmark = True
>>> torch.backends.cuda.matmul.allow_tf32 = True
>>> torch.backends.mps.is_available()
False
"""

from . import cuda, cudnn, mps  # noqa: F401

__all__ = ["cuda", "cudnn", "mps"]


def __getattr__(name):
    raise AttributeError(f"tinyattn.compat.backends has no `{name}` yet")

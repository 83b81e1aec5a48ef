"""``torch.backends``: the flags scripts set for cuDNN, TF32, Apple's MPS and the CPU libraries.

compat runs no cuDNN, TF32, oneDNN, MKL, NNPACK or OpenMP kernels of its own, so the flags change
nothing here; they hold what a script sets, and each ``is_available()`` says ``False``, as torch's do
on a machine without those kernels.

>>> import tinyattn.compat as torch
>>> torch.backends.cudnn.benchmark = True
>>> torch.backends.cuda.matmul.allow_tf32 = True
>>> torch.backends.mps.is_available()
False
"""

from ..scope import missing
from . import (  # noqa: F401
    cpu,
    cuda,
    cudnn,
    cusparselt,
    kleidiai,
    mha,
    miopen,
    mkl,
    mkldnn,
    mps,
    nnpack,
    openmp,
    opt_einsum,
    quantized,
)

__all__ = ["cpu", "cuda", "cudnn", "cusparselt", "kleidiai", "mha", "miopen", "mkl", "mkldnn", "mps", "nnpack",
           "openmp", "opt_einsum", "quantized"]


def __getattr__(name):
    raise missing(__name__, name)

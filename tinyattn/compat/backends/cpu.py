"""``torch.backends.cpu``: the SIMD level the host's kernels use (NumPy's, here)."""

import numpy as np


def get_cpu_capability():
    """``"AVX512"``, ``"AVX2"`` or ``"DEFAULT"``: the widest vector instructions NumPy dispatches to on this host."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    features = getattr(getattr(core, "_multiarray_umath", None), "__cpu_features__", {})
    if features.get("AVX512F"):
        return "AVX512"
    if features.get("AVX2"):
        return "AVX2"
    return "DEFAULT"

"""PyTorch's OpInfo database (``op_db``) divided into tinyattn's families, and the entries left out, each with why.

Each family's module lists its entries (``ENTRIES``), the checks known to fail with the reason (``KNOWN``: the test
is a strict xfail, so a fix that makes it pass must also remove the line) and the samples tinyattn refuses on
purpose, each with the error it gives (``REFUSED``). ``tests/ops/test_opinfo.py`` runs them; ``scope()`` says where
every one of ``op_db``'s names belongs, and a name in none of them fails ``test_every_entry_is_classified``.
"""

from . import (
    comparison,
    creation,
    indexing,
    nn_functional,
    pointwise,
    products,
    reductions,
    shapes,
    sorting,
)

FAMILIES = {
    "pointwise": pointwise, "comparison": comparison, "reductions": reductions, "sorting": sorting, "shapes": shapes,
    "indexing": indexing, "products": products, "creation": creation, "nn_functional": nn_functional,
}

# whole namespaces and kinds the issue leaves out, matched by prefix
OUT_OF_SCOPE_PREFIXES = {
    "fft.": "FFTs are out of scope",
    "linalg.": "linear-algebra decompositions and solvers are out of scope",
    "special.": "special functions beyond erf, erfc and erfinv are out of scope",
    "sparse.": "sparse tensors are out of scope",
    "masked.": "torch.masked's prototype masked reductions are out of scope",
    "signal.": "signal-processing windows are out of scope",
    "jiterator_": "CUDA-only runtime-compiled kernels",
    "torch.": "ATen internals with no Python API for models",
    "_": "private ATen entry points with no Python API for models",
    "native_": "ATen internals with no Python API for models",
}

OUT_OF_SCOPE = {
    # complex numbers
    **dict.fromkeys(["conj", "conj_physical", "resolve_conj", "resolve_neg", "view_as_real", "view_as_complex",
                     "complex", "polar", "angle", "real", "imag", "cdouble", "cfloat", "chalf", "mH", "H",
                     "nn.functional.silu.complex"], "complex numbers are out of scope"),
    # special functions beyond those named
    **dict.fromkeys(["i0", "lgamma", "digamma", "mvlgamma.mvlgamma_p_1", "mvlgamma.mvlgamma_p_3",
                     "mvlgamma.mvlgamma_p_5", "polygamma.polygamma_n_0", "polygamma.polygamma_n_1",
                     "polygamma.polygamma_n_2", "polygamma.polygamma_n_3", "polygamma.polygamma_n_4", "igamma",
                     "igammac"], "special functions beyond erf, erfc and erfinv are out of scope"),
    # decompositions and solvers
    **dict.fromkeys(["cholesky", "cholesky_inverse", "cholesky_solve", "geqrf", "lu", "lu_solve", "lu_unpack",
                     "matrix_exp", "ormqr", "qr", "svd", "svd_lowrank", "pca_lowrank", "triangular_solve",
                     "pinverse", "logdet"], "linear-algebra decompositions and solvers are out of scope"),
    # FFTs
    **dict.fromkeys(["stft", "istft"], "FFTs are out of scope"),
    # random samplers (the creators that draw are in scope for their shapes and dtypes)
    **dict.fromkeys(["cauchy", "exponential", "geometric", "log_normal", "normal", "normal.in_place",
                     "normal.number_mean", "uniform", "bernoulli", "multinomial", "nn.functional.rrelu",
                     "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
                     "nn.functional.feature_alpha_dropout.with_train",
                     "nn.functional.feature_alpha_dropout.without_train", "nn.functional.fractional_max_pool2d",
                     "nn.functional.fractional_max_pool3d"],
                    "random samplers are out of scope beyond their shapes and dtypes"),
    # resampling (convolution and pooling are in nn_functional's family)
    **dict.fromkeys(["max_pool2d_with_indices_backward", "nn.functional.max_unpool1d.grad",
                     "nn.functional.max_unpool2d.grad", "nn.functional.max_unpool3d.grad",
                     "nn.functional.interpolate.area", "nn.functional.grid_sample", "grid_sampler_2d",
                     "grid_sampler_3d"],
                    "area resampling, grid sampling and ATen's pooling backward are out of scope"),
    # memory layout that tinyattn does not model
    **dict.fromkeys(["as_strided", "as_strided.partial_views", "as_strided_copy", "as_strided_scatter",
                     "empty_strided", "new_empty_strided", "empty_permuted", "resize_", "resize_as_",
                     "to_sparse", "unsafe_chunk", "unsafe_split"],
                    "strides and storage are not part of tinyattn's tensor model"),
    "slice": "ATen's `aten.slice` has no torch function or method (Python's slicing is `__getitem__`)",
    # ATen's functional copy variants
    **dict.fromkeys(["alias_copy", "diagonal_copy", "expand_copy", "narrow_copy", "permute_copy",
                     "split_with_sizes_copy", "squeeze_copy", "t_copy", "transpose_copy", "unbind_copy",
                     "unfold_copy", "unsqueeze_copy", "view_copy"],
                    "ATen's `*_copy` variants exist for graph compilers, not for model code"),
    # beyond the families the issue names
    **dict.fromkeys(["histogram", "histogramdd", "histc", "bincount", "corrcoef", "cov", "gradient", "trapz",
                     "trapezoid", "cumulative_trapezoid", "renorm", "hash_tensor", "nn.functional.ctc_loss",
                     "bmm.triton_optimized", "index_reduce.mean", "index_reduce.prod", "index_reduce.amin",
                     "index_reduce.amax", "nn.functional.multi_head_attention_forward",
                     "nn.functional.linear_cross_entropy", "nn.functional.linear_cross_entropy.chunked",
                     "nn.functional.linear_cross_entropy.chunked_none", "bfloat16"],
                    "not in a family this round covers (statistics, integration, image layers, CTC, "
                    "torch.nn.functional's attention internals, bfloat16 which NumPy lacks)"),
}


def op_key(op):
    """An OpInfo entry's name with its variant: ``div.floor_rounding``."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def scope(key):
    """Where an entry belongs: ``("in", family)`` or ``("out", reason)``; None for an unclassified one."""
    for name, family in FAMILIES.items():
        if key in family.ENTRIES:
            return "in", name
    if key in OUT_OF_SCOPE:
        return "out", OUT_OF_SCOPE[key]
    for prefix, reason in OUT_OF_SCOPE_PREFIXES.items():
        if key.startswith(prefix):
            return "out", reason
    return None

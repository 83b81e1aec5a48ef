"""OpInfo entries in scope: reductions and norms (``tinyattn/reductions.py``)."""

ENTRIES = [
    "all", "any", "amax", "amin", "aminmax", "argmax", "argmin", "count_nonzero", "mean", "nanmean", "std",
    "std.unbiased", "var", "var.unbiased", "var_mean", "var_mean.unbiased", "std_mean", "std_mean.unbiased", "prod",
    "sum", "nansum", "logsumexp", "norm", "norm.nuc", "norm.fro", "norm.inf", "linalg.vector_norm",
    "linalg.matrix_norm", "linalg.norm", "linalg.norm.subgradients_at_zero", "max.reduction_with_dim",
    "max.reduction_no_dim", "min.reduction_with_dim", "min.reduction_no_dim", "dist", "trace", "sum_to_size",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ('linalg.norm.subgradients_at_zero', 'gradgrad'): "deliberate: at the zero vector torch's second derivative of "
    "the 2-norm is NaN (0/0 in its double backward); tinyattn's is 0, the subgradient its first derivative takes",
    ('logsumexp', 'fd'): "harness: a sample's values reach 1.9e6, where float64's spacing (2.3e-10) over the "
    "finite-difference step (1e-6) alone errs by 2e-4, past fd's tolerance; the gradient equals torch's (grad passes)",
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
    # the nuclear and spectral norms need singular values (an SVD): decompositions are out of scope
    "norm.nuc": (NotImplementedError, "needs the matrix's singular values"),
    "linalg.matrix_norm": (NotImplementedError, "needs the matrix's singular values"),
    "linalg.norm": (NotImplementedError, "needs the matrix's singular values"),
    "linalg.norm.subgradients_at_zero": (NotImplementedError, "needs the matrix's singular values"),
}

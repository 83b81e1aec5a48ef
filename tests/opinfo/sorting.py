"""OpInfo entries in scope: sorting, selection and cumulative ops (``tinyattn/sorting.py``)."""

ENTRIES = [
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile",
    "unique", "unique_consecutive", "searchsorted", "bucketize", "cumsum", "cumprod", "cummax", "cummin",
    "logcumsumexp", "diff",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ('logcumsumexp', 'jvp'): "harness: torch's own forward-mode formula errs by 3e-6 (relative) on a sample: the "
    "tangent of the first running value, which is exactly the input's tangent, comes out 0.0932603 for 0.0932606; "
    "tinyattn's is exact, and grad, fd and gradgrad agree",
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
    # a data-dependent number of values: torch.vmap refuses these too
    "unique": (RuntimeError, "vmap: unique returns a number of values that depends on the data"),
    "unique_consecutive": (RuntimeError, "vmap: unique_consecutive returns a number of values that depends on"),
}

"""OpInfo entries in scope: indexing: gathers, scatters, masks (``tinyattn/indexing.py``)."""

ENTRIES = [
    "gather", "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod", "scatter_reduce.mean",
    "scatter_reduce.amin", "scatter_reduce.amax", "index_add", "index_copy", "index_fill", "index_select",
    "index_put", "masked_scatter", "masked_select", "take", "take_along_dim", "put", "__getitem__", "nonzero",
    "nonzero_static", "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter", "slice", "unravel_index",
]

HARNESS_SLICE = ("harness: aten.slice has no torch function or Tensor method, so the harness finds no form to call "
                 "(forms() is empty: its value checks pass vacuously, the others index forms()[0])")

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ('scatter_reduce.prod', 'gradgrad'): (
        "harness: with include_self=False the first-order gradient of input is constant (zero where written), so "
        "its second-order gradient is exactly zero, which tinyattn gives as None; torch's is roundoff (about 1e-15) "
        "and the harness wants exact zeros from the side that has one"),
    ('slice', 'fd'): HARNESS_SLICE,
    ('slice', 'grad'): HARNESS_SLICE,
    ('slice', 'gradgrad'): HARNESS_SLICE,
    ('slice', 'jvp'): HARNESS_SLICE,
    ('slice', 'vmap'): HARNESS_SLICE,
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

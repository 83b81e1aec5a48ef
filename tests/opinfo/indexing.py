"""OpInfo entries in scope: indexing: gathers, scatters, masks (``tinyattn/indexing.py``)."""

ENTRIES = [
    "gather", "scatter", "scatter_add", "scatter_reduce.sum", "scatter_reduce.prod", "scatter_reduce.mean",
    "scatter_reduce.amin", "scatter_reduce.amax", "index_add", "index_copy", "index_fill", "index_select",
    "index_put", "masked_scatter", "masked_select", "take", "take_along_dim", "put", "__getitem__", "nonzero",
    "nonzero_static", "argwhere", "select_scatter", "slice_scatter", "diagonal_scatter", "unravel_index",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

"""OpInfo entries in scope: products: matrix, batched, tensor (``tinyattn/products.py``)."""

ENTRIES = [
    "addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm", "addr", "dot", "vdot", "bmm", "mv", "mm", "matmul",
    "outer", "inner", "tensordot", "einsum", "kron", "linalg.multi_dot", "linalg.vecdot", "linalg.matrix_power",
    "linalg.cross", "cross", "linalg.vander",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
    "linalg.matrix_power": (NotImplementedError, "negative exponent .* needs the matrix inverse"),
}

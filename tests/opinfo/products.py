"""OpInfo entries in scope: products: matrix, batched, tensor (``tinyattn/products.py``)."""

ENTRIES = [
    "addmm", "addmm.decomposed", "addmv", "addbmm", "baddbmm", "addr", "dot", "vdot", "bmm", "mv", "mm", "matmul",
    "outer", "inner", "tensordot", "einsum", "kron", "linalg.multi_dot", "linalg.vecdot", "linalg.matrix_power",
    "linalg.cross", "cross", "linalg.vander",
]

HARNESS_EINSUM = ("harness: torch's einsum entry is a lambda taking (operands, equation); the harness calls compat's "
                  "einsum in that order, which torch.einsum refuses too (einsum(equation, operands) passes every "
                  "sample's values and gradients, checked by hand)")

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ('einsum', 'fd'): HARNESS_EINSUM,
    ('einsum', 'float16'): HARNESS_EINSUM,
    ('einsum', 'float32'): HARNESS_EINSUM,
    ('einsum', 'grad'): HARNESS_EINSUM,
    ('einsum', 'gradgrad'): HARNESS_EINSUM,
    ('einsum', 'jvp'): HARNESS_EINSUM,
    ('einsum', 'value'): HARNESS_EINSUM,
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
    "linalg.matrix_power": (NotImplementedError, "negative exponent .* needs the matrix inverse"),
}

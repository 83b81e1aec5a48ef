"""OpInfo entries in scope: creators and conversions (``tinyattn/creation.py``)."""

ENTRIES = [
    "arange", "linspace", "linspace.tensor_overload", "logspace", "logspace.tensor_overload", "empty", "empty_like",
    "zeros", "ones", "full", "eye", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
    "new_empty", "scalar_tensor", "randn", "randn_like", "rand_like", "randint", "randint_like", "tril_indices",
    "triu_indices", "bool", "byte", "char", "double", "float", "half", "int", "long", "short", "to", "item", "fill",
    "zero_",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

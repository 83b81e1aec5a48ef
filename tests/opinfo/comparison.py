"""OpInfo entries in scope: comparisons, logical and bitwise ops, clamps and selections (``comparison.py``)."""

ENTRIES = [
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "logical_xor", "isclose",
    "allclose", "equal", "isfinite", "isinf", "isposinf", "isneginf", "isnan", "isreal", "isin", "signbit", "where",
    "masked_fill", "clamp", "clamp_max", "clamp_min", "maximum", "minimum", "max.binary", "min.binary", "fmax",
    "fmin", "heaviside", "nextafter", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "__rand__", "__ror__", "__rxor__",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

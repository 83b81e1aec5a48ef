"""OpInfo entries in scope: elementwise unary and binary math (``tinyattn/pointwise.py``)."""

ENTRIES = [
    "abs", "acos", "acosh", "add", "mul", "sub", "asin", "asinh", "atan", "atan2", "atanh", "addcmul", "addcdiv",
    "ceil", "copysign", "cos", "cosh", "deg2rad", "div.no_rounding_mode", "div.trunc_rounding",
    "div.floor_rounding", "true_divide", "exp", "exp2", "expm1", "fmod", "remainder", "frac", "floor",
    "floor_divide", "frexp", "ldexp", "log", "log10", "log2", "log1p", "logaddexp", "logaddexp2", "neg", "positive",
    "pow", "float_power", "rad2deg", "reciprocal", "round", "round.decimals_0", "round.decimals_3",
    "round.decimals_neg_3", "rsqrt", "sqrt", "square", "sigmoid", "sign", "sgn", "sin", "sinc", "sinh", "tan",
    "tanh", "trunc", "lerp", "xlogy", "hypot", "erf", "erfc", "erfinv", "nan_to_num", "logit", "clone",
    "contiguous", "__radd__", "__rdiv__", "__rmul__", "__rmod__", "__rpow__", "__rsub__", "__rmatmul__", "rsub",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

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
    ('__rpow__', 'fd'): "harness: sample 0 raises a negative base (-7.58) to a fractional power (-4.83): the value "
                        "is NaN in torch and here, so the gradient and the central differences are both NaN, which "
                        "never compare equal (the grad check, which allows NaN, passes)",
    ('copysign', 'gradgrad'): "harness: the second derivative is exactly zero; torch's formula (grad · result / input) "
                              "leaves rounding noise of -1.1e-16 where tinyattn records no gradient at all, and a "
                              "gradient present on one side only must be exactly zero",
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

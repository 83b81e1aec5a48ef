"""OpInfo entries in scope: creators and conversions (``tinyattn/creation.py``)."""

ENTRIES = [
    "arange", "linspace", "linspace.tensor_overload", "logspace", "logspace.tensor_overload", "empty", "empty_like",
    "zeros", "ones", "full", "eye", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
    "new_empty", "scalar_tensor", "randn", "randn_like", "rand_like", "randint", "randint_like", "tril_indices",
    "triu_indices", "bool", "byte", "char", "double", "float", "half", "int", "long", "short", "to", "item", "fill",
    "zero_",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
# torch.float, torch.half… are dtypes, not functions, yet the harness calls compat's (NumPy's dtype types) as the
# function form; the method forms pass every check (run with the function form left out)
_DTYPE_AS_FUNCTION = (
    "harness: torch.{0} is a dtype, not a function (torch.{0}(x) raises TypeError), but has_function_form takes any "
    "attribute of torch and calls compat's {0} (NumPy's dtype type, which gives a NumPy value, not a tensor); "
    "the method t.{0}() passes this check"
)

KNOWN = {
    **{(name, check): _DTYPE_AS_FUNCTION.format(name) for name, checks in {
        "bool": ("value", "vmap", "float32", "float16"),
        "double": ("value", "grad", "fd", "gradgrad", "jvp", "vmap", "float32", "float16"),
        "float": ("value", "grad", "fd", "gradgrad", "vmap", "float32", "float16"),
        "half": ("value", "grad", "fd", "gradgrad", "vmap", "float32", "float16"),
        "int": ("value", "vmap", "float32", "float16"),
        "long": ("value", "vmap", "float32", "float16"),
        "short": ("value", "vmap", "float32", "float16"),
    }.items() for check in checks},
    **dict.fromkeys([('float', 'fd'), ('half', 'fd')], (
        "harness: the function form is NumPy's dtype type (as above); and the method's own output is rounded to "
        "float32/float16, so central differences with eps 1e-6 measure the rounding (off by ~7% on a 0-d "
        "sample), not the derivative; the method's gradient matches torch's (the grad check on the method)")),
    ('item', 'vmap'): "harness: item has no function form and op_db gives it no method_variant: forms(op)[0] raises "
                      "IndexError (and item returns a number, which vmap cannot return)",
    **dict.fromkeys([('zero_', 'grad'), ('zero_', 'fd'), ('zero_', 'gradgrad')], (
        "harness: the function form calls zero_(x) on the sample's leaf that requires grad, which torch.zero_ refuses "
        "too (op_db's own op clones it first); tinyattn refuses it by torch's rule")),
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

"""OpInfo entries in scope: shape and view ops (``tinyattn/shapes.py``)."""

ENTRIES = [
    "broadcast_to", "broadcast_tensors", "broadcast_shapes", "chunk", "expand", "expand_as", "flatten", "unflatten",
    "flip", "fliplr", "flipud", "movedim", "narrow", "permute", "ravel", "reshape", "reshape_as", "view", "view_as",
    "repeat", "roll", "rot90", "select", "split", "split.list_args", "split_with_sizes", "tensor_split", "hsplit",
    "vsplit", "dsplit", "squeeze", "squeeze.multiple", "unsqueeze", "stack", "hstack", "vstack", "dstack",
    "column_stack", "cat", "atleast_1d", "atleast_2d", "atleast_3d", "t", "T", "mT", "transpose", "unbind",
    "unfold", "diag", "diag_embed", "diagonal", "diagflat", "linalg.diagonal", "tril", "triu", "block_diag",
    "cartesian_prod", "combinations", "meshgrid.variadic_tensors", "meshgrid.list_of_tensors", "tile",
    "repeat_interleave",
]

# (entry, check) -> why it fails; checks: value, grad, fd, gradgrad, jvp, vmap, float32, float16
KNOWN = {
    ('tensor_split', 'jvp'): "harness: torch's own side fails: torch.func.jvp of torch.tensor_split raises \"Cannot "
                             "access data pointer of Tensor that doesn't have storage\" on the samples whose indices "
                             "come as a tensor (tinyattn's jvp of them agrees with slicing the tangent)",
}

# entry -> (error type, a regular expression its message matches): samples refused on purpose
REFUSED = {
}

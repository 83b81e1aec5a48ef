"""PyTorch state-dict layout <-> tinyattn layout, as pure functions on dicts of NumPy arrays.

PyTorch's ``nn.MultiheadAttention`` packs the three input projections into one matrix;
tinyattn keeps three ``nn.Linear`` modules:

    PyTorch                                         tinyattn
    P.in_proj_weight (3E, E)                   <->  P.q_proj.weight, P.k_proj.weight, P.v_proj.weight (E, E)
    P.q_proj_weight, P.k_proj_weight, P.v_proj_weight  (when kdim or vdim differ from E)
                                               <->  P.q_proj.weight (E, E), P.k_proj.weight (E, kdim), ...
    P.in_proj_bias (3E,)                       <->  P.q_proj.bias, P.k_proj.bias, P.v_proj.bias (E,)
    P.out_proj.weight, P.out_proj.bias         <->  the same
    D.multihead_attn.*                         <->  D.cross_attn.*   (in a decoder layer: D also has self_attn)

``P`` is any prefix (``layers.3.self_attn``, ``decoder.layers.0.multihead_attn``, ...), so the
mapping covers ``MultiheadAttention``, the encoder and decoder layers and their stacks. A module
is recognised as attention by its keys: PyTorch's by ``in_proj_weight`` or ``q_proj_weight``,
tinyattn's by the four ``q_proj``/``k_proj``/``v_proj``/``out_proj`` weights side by side; a
``multihead_attn`` (``cross_attn``) is renamed only where a ``self_attn`` sits beside it, as in a
decoder layer. Every other key passes through unchanged. The arrays in the result are copies.
Convert a PyTorch module's tensors first: ``{k: v.numpy() for k, v in m.state_dict().items()}``.
tinyattn tensors and backend arrays (CuPy, strict) are accepted too and copied to the host explicitly.

>>> import numpy as np
>>> torch_sd = {"in_proj_weight": np.arange(12.0).reshape(6, 2), "in_proj_bias": np.zeros(6),
...             "out_proj.weight": np.eye(2), "out_proj.bias": np.zeros(2)}
>>> ours = from_torch(torch_sd)
>>> list(ours)[:4]
['q_proj.weight', 'q_proj.bias', 'k_proj.weight', 'k_proj.bias']
>>> ours["k_proj.weight"]
array([[4., 5.],
       [6., 7.]])
>>> all(np.array_equal(to_torch(ours)[k], v) for k, v in torch_sd.items())
True
"""

import numpy as np

from . import backend
from .engine import Tensor

_PROJECTIONS = ("q_proj", "k_proj", "v_proj")
_TORCH_PROJECTION_NAMES = ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight", "v_proj_weight")


def _split_key(key):
    """``"a.b.c"`` -> ``("a.b.", "c")``; a key without dots has the empty prefix."""
    head, _, last = key.rpartition(".")
    return (head + "." if head else ""), last


def _module_prefixes(keys):
    """Every module path that holds a key, as ``"a.b."`` (``""`` for the root)."""
    prefixes = set()
    for key in keys:
        parts = key.split(".")
        prefixes.update(".".join(parts[:i]) + "." for i in range(1, len(parts)))
    return prefixes


def _rename_cross_attention(key, prefixes, old, new):
    """Rename the path component ``old`` to ``new`` where the module beside it has a ``self_attn``."""
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        if part == old and ".".join(parts[:i] + ["self_attn"]) + "." in prefixes:
            parts[i] = new
    return ".".join(parts)


def _on_host(state_dict, name):
    """``state_dict`` with every value a NumPy array: device data is copied explicitly, never implicitly."""
    if not hasattr(state_dict, "items"):
        raise TypeError(f"{name}: expected a state dict (a mapping of names to arrays), "
                        f"got {type(state_dict).__name__}")
    host = {}
    for key, value in state_dict.items():
        if isinstance(value, Tensor):
            value = value._data
        host[key] = backend.to_numpy(value) if backend.is_array(value) else np.asarray(value)
    return host


def from_torch(state_dict):
    """A PyTorch-layout state dict (NumPy arrays) in tinyattn's layout; see the module docstring.

    Raises ``ValueError`` when a packed ``in_proj_weight`` or ``in_proj_bias`` does not split
    into three equal parts.

    A PyTorch ``nn.MultiheadAttention``'s weights, loaded into ``ta.nn.MultiHeadAttention``, give its outputs:

    >>> import numpy as np, torch
    >>> import tinyattn as ta
    >>> _ = torch.manual_seed(0)
    >>> theirs = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    >>> torch_sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    >>> list(torch_sd)
    ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']
    >>> ours = ta.nn.MultiHeadAttention(4, 2)
    >>> ours.load_state_dict(from_torch(torch_sd))
    IncompatibleKeys(missing_keys=[], unexpected_keys=[])
    >>> x = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)    # (B, L, E)
    >>> out, _ = ours(ta.tensor(x), ta.tensor(x), ta.tensor(x))
    >>> expected, _ = theirs(*[torch.from_numpy(x)] * 3)
    >>> np.allclose(out.numpy(), expected.detach().numpy(), atol=1e-6)
    True
    """
    state_dict = _on_host(state_dict, "from_torch")
    prefixes = _module_prefixes(state_dict)
    result, unpacked = {}, set()
    for key, value in state_dict.items():
        prefix, name = _split_key(key)
        if name in _TORCH_PROJECTION_NAMES:
            if prefix not in unpacked:  # the whole group is emitted at its first key
                unpacked.add(prefix)
                for our_key, array in _unpack_attention(state_dict, prefix):
                    result[_rename_cross_attention(our_key, prefixes, "multihead_attn", "cross_attn")] = array
            continue
        result[_rename_cross_attention(key, prefixes, "multihead_attn", "cross_attn")] = np.array(value)
    return result


def _unpack_attention(state_dict, prefix):
    """``(key, array)`` pairs of the three tinyattn projections under ``prefix``."""
    packed_weight = state_dict.get(prefix + "in_proj_weight")
    if packed_weight is not None:
        weights = _thirds(packed_weight, prefix + "in_proj_weight")
    else:
        missing = [prefix + p + "_weight" for p in _PROJECTIONS if prefix + p + "_weight" not in state_dict]
        if missing:
            raise ValueError(f"from_torch: no {prefix}in_proj_weight, and separate projections missing: {missing}")
        weights = [state_dict[prefix + p + "_weight"] for p in _PROJECTIONS]
    packed_bias = state_dict.get(prefix + "in_proj_bias")
    biases = _thirds(packed_bias, prefix + "in_proj_bias") if packed_bias is not None else [None] * 3
    for projection, weight, bias in zip(_PROJECTIONS, weights, biases):
        yield prefix + projection + ".weight", np.array(weight)
        if bias is not None:
            yield prefix + projection + ".bias", np.array(bias)


def _thirds(array, key):
    if array.shape[0] % 3:
        raise ValueError(f"from_torch: {key} of shape {tuple(array.shape)} does not split into q, k, v thirds")
    return np.split(array, 3, axis=0)


def to_torch(state_dict):
    """A tinyattn-layout state dict (NumPy arrays) in PyTorch's layout; see the module docstring.

    The three projections are packed into ``in_proj_weight`` when their weights have the same
    shape (``kdim == vdim == embed_dim``), else kept as ``q_proj_weight``/``k_proj_weight``/
    ``v_proj_weight``; their biases always pack into ``in_proj_bias``.

    ``ta.nn.MultiHeadAttention``'s weights, loaded into PyTorch's ``nn.MultiheadAttention``, give its outputs:

    >>> import numpy as np, torch
    >>> import tinyattn as ta
    >>> _ = ta.manual_seed(0)
    >>> ours = ta.nn.MultiHeadAttention(4, 2)
    >>> torch_sd = to_torch(ours.state_dict())
    >>> list(torch_sd)
    ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']
    >>> torch_sd["in_proj_weight"].shape    # q, k and v stacked: (3E, E)
    (12, 4)
    >>> theirs = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    >>> theirs.load_state_dict({k: torch.from_numpy(v) for k, v in torch_sd.items()})
    <All keys matched successfully>
    >>> x = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)    # (B, L, E)
    >>> out, _ = ours(ta.tensor(x), ta.tensor(x), ta.tensor(x))
    >>> expected, _ = theirs(*[torch.from_numpy(x)] * 3)
    >>> np.allclose(out.numpy(), expected.detach().numpy(), atol=1e-6)
    True
    """
    state_dict = _on_host(state_dict, "to_torch")
    prefixes = _module_prefixes(state_dict)
    result, packed = {}, set()
    for key, value in state_dict.items():
        head, name = _split_key(key)
        module, projection = _split_key(head[:-1]) if head else ("", "")
        if projection in _PROJECTIONS and _is_attention(state_dict, module):
            if module not in packed:  # the whole group is emitted at its first key
                packed.add(module)
                torch_prefix = _rename_cross_attention(module, prefixes, "cross_attn", "multihead_attn")
                result.update(_pack_attention(state_dict, module, torch_prefix))
            continue
        result[_rename_cross_attention(key, prefixes, "cross_attn", "multihead_attn")] = np.array(value)
    return result


def _is_attention(state_dict, module):
    return all(module + p + ".weight" in state_dict for p in _PROJECTIONS + ("out_proj",))


def _pack_attention(state_dict, module, torch_prefix):
    """PyTorch's packed (or separate) projection keys for the tinyattn attention at ``module``."""
    weights = [state_dict[module + p + ".weight"] for p in _PROJECTIONS]
    packed = {}
    if all(w.shape == weights[0].shape for w in weights):
        packed[torch_prefix + "in_proj_weight"] = np.concatenate(weights, axis=0)  # (3E, E)
    else:
        for p, w in zip(_PROJECTIONS, weights):
            packed[torch_prefix + p + "_weight"] = np.array(w)
    biases = [state_dict.get(module + p + ".bias") for p in _PROJECTIONS]
    if all(b is not None for b in biases):
        packed[torch_prefix + "in_proj_bias"] = np.concatenate(biases, axis=0)  # (3E,)
    elif any(b is not None for b in biases):
        raise ValueError(
            f"to_torch: {module or 'the attention'} has biases on only some of q_proj, k_proj, v_proj; "
            "PyTorch packs all three into in_proj_bias"
        )
    return packed

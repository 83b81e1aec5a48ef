"""``torch.backends.mha``: the switch of ``nn.MultiheadAttention``'s fast path. compat's attention takes its fused
form when the model is compiled (``torch.compile``), whatever the flag says; the flag holds what a script sets."""

_FASTPATH = [True]


def get_fastpath_enabled():
    return _FASTPATH[0]


def set_fastpath_enabled(value):
    _FASTPATH[0] = bool(value)

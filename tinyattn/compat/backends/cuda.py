"""``torch.backends.cuda``: ``matmul.allow_tf32`` and the attention-kernel switches, flags only."""

import types

matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                               allow_bf16_reduced_precision_reduction=True)


def is_built():
    return False


def flash_sdp_enabled():
    return False


def mem_efficient_sdp_enabled():
    return False


def math_sdp_enabled():
    return True

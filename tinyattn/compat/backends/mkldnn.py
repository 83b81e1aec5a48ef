"""``torch.backends.mkldnn``: flags only (compat runs no oneDNN kernels)."""

enabled = True
deterministic = False
allow_tf32 = None


def is_available():
    return False

"""``torch.backends.opt_einsum``: flags only (the opt_einsum package is not used)."""

enabled = False
strategy = None


def is_available():
    return False

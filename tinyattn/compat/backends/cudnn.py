"""``torch.backends.cudnn``: flags only (compat runs no cuDNN kernels)."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    return False


def version():
    return None

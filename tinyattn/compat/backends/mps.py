"""``torch.backends.mps``: Apple's GPUs, which compat does not reach."""


def is_available():
    return False


def is_built():
    return False

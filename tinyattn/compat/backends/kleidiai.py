"""``torch.backends.kleidiai``: Arm's KleidiAI kernels, not used."""


def is_available():
    return False

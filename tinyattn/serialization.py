"""Checkpoints: ``save`` and ``load`` of state dicts as NumPy ``.npz`` archives (being written)."""


def save(state_dict, path):
    raise NotImplementedError


def load(path):
    raise NotImplementedError

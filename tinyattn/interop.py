"""PyTorch state-dict layout <-> tinyattn layout (being written)."""

"""Gradient checking and hypothesis strategies (being written)."""

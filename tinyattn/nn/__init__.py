"""Layers, losses and their functional forms."""

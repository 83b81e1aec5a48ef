"""``torch.backends.miopen``: AMD's MIOpen, not used; flags only."""

immediate = False

"""``torch.nn.modules``: the submodules that hold torch's layer classes, each re-exporting ``tinyattn.compat.nn``'s."""

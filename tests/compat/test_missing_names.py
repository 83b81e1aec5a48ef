"""A name compat does not have yet says so, in every submodule, and an import of it fails the same way."""

import importlib

import pytest

MODULES = ["tinyattn.compat", "tinyattn.compat.nn", "tinyattn.compat.nn.functional", "tinyattn.compat.nn.init",
           "tinyattn.compat.nn.utils", "tinyattn.compat.optim", "tinyattn.compat.optim.lr_scheduler",
           "tinyattn.compat.autograd", "tinyattn.compat.cuda", "tinyattn.compat.backends", "tinyattn.compat.utils",
           "tinyattn.compat.utils.data", "tinyattn.compat.func", "tinyattn.compat.autograd.forward_ad",
           "tinyattn.compat.autograd.functional", "tinyattn.compat.nn.modules", "tinyattn.compat.nn.modules.linear",
           "tinyattn.compat.nn.modules.loss", "tinyattn.compat.nn.modules.utils"]


@pytest.mark.parametrize("module_name", MODULES)
def test_a_missing_name_raises_an_attribute_error_that_names_it(module_name):
    module = importlib.import_module(module_name)
    with pytest.raises(AttributeError, match=rf"^{module_name.replace('.', '[.]')} has no `not_here_yet` yet$"):
        _ = module.not_here_yet
    assert not hasattr(module, "not_here_yet")
    with pytest.raises(ImportError, match="not_here_yet"):
        exec(f"from {module_name} import not_here_yet", {})


def test_what_is_there_is_found():
    import tinyattn.compat as torch

    assert torch.nn.functional.softmax is not None and torch.optim.AdamW is not None
    assert torch.autograd.Function is importlib.import_module("tinyattn").autograd.Function
    assert torch.nn.LazyLinear is not None and torch.nn.init.xavier_normal_ is not None

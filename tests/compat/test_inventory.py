"""torch's inventory against compat: every public name torch has is classified, and the page says so.

``tests/compat/inventory.py`` walks torch's public API; this test fails while any name is *unclassified* (neither
implemented, refused with ``compat.refusals.refused``, nor out of scope with a reason in ``compat.scope``), and while
``docs/compat_inventory.md`` differs from what the inventory generates now. A new torch release that adds a name
fails it until the name is classified.
"""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import inventory  # noqa: E402

import tinyattn.compat as compat  # noqa: E402
from tinyattn.compat.scope import OUT_OF_SCOPE  # noqa: E402

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "compat_inventory.md"


@pytest.fixture(scope="module")
def table():
    return inventory.inventory()


def test_every_public_torch_name_is_classified(table):
    unclassified = {namespace: [name for name, (standing, _) in names.items() if standing == "unclassified"]
                    for namespace, names in table.items()}
    unclassified = {namespace: names for namespace, names in unclassified.items() if names}
    assert not unclassified, f"torch names compat neither implements, refuses nor puts out of scope: {unclassified}"


def test_the_generated_page_is_current(table):
    assert PAGE.read_text() == inventory.markdown(table), (
        "docs/compat_inventory.md is stale: python tests/compat/inventory.py --markdown docs/compat_inventory.md")


def test_an_out_of_scope_name_says_why_when_asked_for():
    with pytest.raises(AttributeError, match="out of scope.*quantization"):
        compat.quantize_per_tensor  # noqa: B018
    with pytest.raises(AttributeError, match="tinyattn.compat has no `no_such_name`"):
        compat.no_such_name  # noqa: B018


def test_every_out_of_scope_pattern_matches_some_torch_name(table):
    import fnmatch

    names = [f"{namespace}.{name}" for namespace, group in table.items() for name in group]
    unused = [pattern for pattern, _ in OUT_OF_SCOPE if not fnmatch.filter(names, pattern)]
    assert not unused, f"patterns in compat.scope that match no torch name (a typo, or torch dropped it): {unused}"


def test_a_refusal_counts_as_refused_and_raises_its_reason():
    from tinyattn.compat.refusals import refused

    stub = refused("torch.x", "why")
    assert inventory.classify("torch", "x", type("Owner", (), {"x": stub})) == ("refused", "why")
    with pytest.raises(NotImplementedError, match="torch.x is not supported by tinyattn.compat: why"):
        stub()

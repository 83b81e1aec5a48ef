"""A griffe extension for the API reference: the docstrings' ``>>>`` examples become ``pycon`` code blocks.

The docstrings are plain text with doctest examples (the test run executes them). Markdown would run an example's
lines together into a paragraph and read ``[a][b]`` in its output as a link; fenced, each example shows as the
session it is. A doctest directive (``# doctest: +ELLIPSIS``) is for the test run alone and is left out of the page.
"""

import re

import griffe

DIRECTIVE = re.compile(r"\s*#\s*doctest:.*$")


def fence_doctests(text):
    """``text`` with each run of ``>>>`` lines, their ``...`` continuations and their output fenced."""
    lines, out, inside = text.splitlines(), [], False
    for line in lines:
        stripped = line.strip()
        if not inside and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(DIRECTIVE.sub("", line) if inside else line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)

"""Every Python code block in README.md and docs/*.md runs under pytest (Sybil).

A ``python`` block runs as written; a block with ``>>>`` prompts runs as a doctest and checks the output it
shows. The blocks of one file share one namespace, top to bottom, as a reader pasting them in order would.
``<!-- skip: next -->`` before a block leaves it out (the debugger recipe, which stops at ``breakpoint()``);
shell commands use a ``console`` fence, which nothing runs.
"""

import doctest

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS),
             SkipParser()],
    patterns=["README.md", "docs/*.md"],
).pytest()

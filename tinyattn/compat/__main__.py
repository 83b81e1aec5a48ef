"""``python -m tinyattn.compat script.py [args…]``: the script, unmodified, with torch's imports mapped to compat."""

import sys

from .runner import run

if __name__ == "__main__":  # (not when a doctest collector imports the module)
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print("usage: python -m tinyattn.compat script.py [args...]\n"
              "Runs a PyTorch script unmodified on tinyattn: every `import torch` resolves to tinyattn.compat.")
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    run(sys.argv[1], sys.argv[2:])

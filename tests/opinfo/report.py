"""The OpInfo table: for each family and check, how many in-scope entries pass every sample, are listed as known
failures, or do not apply (the entry has no such derivative or dtype), read from a JUnit file of the harness.

    python -m pytest tests/ops/test_opinfo.py --junitxml=opinfo.xml
    python tests/opinfo/report.py opinfo.xml
"""

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import opinfo  # noqa: E402

CHECKS = ("value", "grad", "fd", "gradgrad", "jvp", "vmap", "float32", "float16")


def outcomes(junit):
    """{(entry, check): "pass" | "known" | "n/a" | "fail"} from the harness's test cases."""
    found = {}
    for case in ET.parse(junit).iter("testcase"):
        match = re.match(r"test_opinfo\[(.*)-(\w+)\]$", case.get("name", ""))
        if not match:
            continue
        skipped = case.find("skipped")
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failed is not None:
            outcome = "fail"
        elif skipped is not None:
            outcome = "known" if skipped.get("type") == "pytest.xfail" else "n/a"
        else:
            outcome = "pass"
        found[match.groups()] = outcome
    return found


def table(found):
    rows = ["| family | entries | every check | " + " | ".join(CHECKS) + " |",
            "|---|---:|---:|" + "---:|" * len(CHECKS)]
    for name, family in list(opinfo.FAMILIES.items()) + [("all", None)]:
        entries = [e for f in opinfo.FAMILIES.values() for e in f.ENTRIES] if family is None else family.ENTRIES
        whole = sum(all(found.get((e, c)) in ("pass", "n/a") for c in CHECKS) for e in entries)
        cells = []
        for check in CHECKS:
            passed = sum(found.get((e, check)) == "pass" for e in entries)
            applies = sum(found.get((e, check)) in ("pass", "known", "fail") for e in entries)
            cells.append(f"{passed}/{applies}")
        rows.append(f"| {name} | {len(entries)} | {whole} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(outcomes(sys.argv[1])))

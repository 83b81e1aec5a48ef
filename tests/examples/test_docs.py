"""The documents' links and the generated performance table: README.md's relative links point at files that
exist (the site's own links are checked by ``mkdocs build --strict``), and ``benchmarks/run.py --markdown``
writes a table headed by the machine, the date and the command that made it."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def relative_links(markdown):
    """The targets of ``[text](target)`` links that are neither URLs nor anchors, without their anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", markdown)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_the_readme_s_relative_links_exist():
    links = relative_links((ROOT / "README.md").read_text())
    assert links, "the README links into docs/"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_every_docs_page_is_in_the_site_s_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    missing = [page for page in pages if page != "performance_table.md" and page not in nav]
    assert not missing, missing


def test_the_benchmark_writes_its_markdown_table(tmp_path):
    table = tmp_path / "table.md"
    arguments = ["--cases", "sdpa", "--sizes", "small", "--repeat", "2", "--markdown", str(table)]
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), *arguments], check=True,
                   capture_output=True, timeout=300)
    text = table.read_text()
    assert f"`python benchmarks/run.py {' '.join(arguments)}`" in text
    assert re.search(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert re.search(r"Machine: .+, \d+ cores", text)
    rows = [line for line in text.splitlines() if line.startswith("| sdpa |")]
    assert [row.split(" | ")[2] for row in rows] == ["fwd", "fwd+bwd"]

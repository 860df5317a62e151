"""The README's sample output, regenerated from a real run so it cannot drift: `python -m forensics.docs` rewrites it.

The block after `MARKER` in README.md is exactly what `forensics analyze sample_runs/runs/nan_lr_too_high` prints
on a fresh database, with the database line showing the default path. `tests/test_readme.py` fails when it differs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SAMPLE_RUN = "sample_runs/runs/nan_lr_too_high"
MARKER = "<!-- sample output: `python -m forensics.docs` regenerates the block below from the real run -->"
DEFAULT_DB_LINE = "database: ~/.cache/run-forensics/forensics.duckdb"


def sample_output(db: Path) -> str:
    """What `forensics analyze SAMPLE_RUN` prints from the repository's folder, analysed into `db`, shown as if
    into the default database (whose replay command needs no --db)."""
    from forensics.text import report
    from forensics.services.analysis import analyze

    result = analyze(REPO / SAMPLE_RUN, db)
    lines = [line.replace(f" --db {db}", "").replace(f"{REPO}/", "") for line in report.text(result).splitlines()]
    return "\n".join(DEFAULT_DB_LINE if line.startswith("database: ") else line for line in lines)


def readme_block(text: str) -> tuple[int, int]:
    """(start, end) offsets of the fenced block's content after MARKER in the README text."""
    at = text.index(MARKER)
    start = text.index("```\n", at) + len("```\n")
    return start, text.index("\n```", start)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        output = sample_output(Path(tmp) / "docs.duckdb")
    text = README.read_text(encoding="utf-8")
    start, end = readme_block(text)
    README.write_text(text[:start] + output + text[end:], encoding="utf-8")
    print(f"rewrote the sample output in {README} ({len(output.splitlines())} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

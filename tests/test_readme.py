"""The README's sample output is what the real run prints today (issue 13: it had drifted)."""

from forensics.docs import README, readme_block, sample_output


def test_readme_sample_output_is_the_real_output(tmp_path):
    text = README.read_text(encoding="utf-8")
    start, end = readme_block(text)
    assert text[start:end] == sample_output(tmp_path / "f.duckdb"), (
        "README.md's sample output is stale: run `python -m forensics.docs` and commit README.md")

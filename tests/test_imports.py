"""The analyze path stays fast: heavy libraries are imported only by the commands that need them."""

import subprocess
import sys

HEAVY = ("torch", "scipy", "wandb", "streamlit", "plotly", "tensorboard", "tbparse", "pandas", "matplotlib")


def test_cli_and_ingest_import_no_heavy_library():
    code = (
        "import sys, forensics.cli, ingest.run, ingest.formats, ingest.store\n"
        "parser = forensics.cli.build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"imported at start-up: {out}"

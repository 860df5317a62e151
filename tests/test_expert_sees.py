"""What an expert sees at a glance, in files the real tools write (Lightning's CSVLogger, SummaryWriter, printed
logs): a held-out pass named by a verb, a validation loss frozen beside a training loss that only scatters, an agent
judged by its reward, a critic that grows while the reward stands, a rise from records that hold no level, an inner
epoch counter, a validation pass that overflows. Each beside its twin, which must not be named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from forensics.cli import main


def analyze(capsys, root: Path, db: Path) -> dict:
    main(["analyze", str(root), "--db", str(db), "--json"])
    return json.loads(capsys.readouterr().out)


def console(root: Path, lines: list[str]) -> None:
    (root / "train.log").write_text("\n".join(lines) + "\n")


def test_an_epoch_evaluated_with_a_loss_is_its_validation_loss(capsys, tmp_path):
    """`Epoch N trained with loss: X` and `Epoch N evaluated with loss: Y`: the second is the held-out loss, judged
    as validation (here rising from its minimum at epoch 1 while training falls), not a second training loss."""
    root = tmp_path / "run"
    root.mkdir()
    train = 0.02 * 0.6 ** np.arange(12)
    val = np.r_[3.4e-4, 2.4e-4, 2.6e-4 * 1.12 ** np.arange(10)]
    lines = []
    for i in range(12):
        lines.append(f"Epoch {i} trained with loss: {train[i]!r}. The running time is 4073.88.")
        lines.append(f"Epoch {i} evaluated with loss: {val[i]!r}, dice score: 1.1e-05. The running time is 713.2.")
    (root / "train.out").write_text("\n".join(lines) + "\n")
    out = analyze(capsys, root, tmp_path / "f.duckdb")
    series = {f["series"] for f in out["findings"]}
    assert "evaluated with loss" not in {f["series"] for f in out["findings"] if f["kind"] in ("plateau", "flat_loss")}
    assert "overfitting" in {f["kind"] for f in out["findings"]}, ([f["summary"] for f in out["findings"]], series)

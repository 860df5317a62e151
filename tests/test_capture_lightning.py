"""The Lightning capture callback with the real Lightning Trainer (CPU, a tiny model): train until a real NaN,
then `forensics replay` with the generated entry point names the op, the module and the sample; the state at
initialisation is saved in Lightning's layout, where `forensics probe` starts its initial-loss check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forensics.cli import main
from tests.runwriters import user_module

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning.pytorch", reason="the test extra installs lightning")

MODULE_SOURCE = '''
import torch
from torch import nn
import lightning.pytorch as L


class LogSoftmaxByHand(nn.Module):
    def forward(self, z):
        return torch.log(torch.softmax(z, dim=-1))


class LitClassifier(L.LightningModule):
    def __init__(self, d_in=8, hidden=16, classes=3, lr=0.01):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, classes))
        self.head = LogSoftmaxByHand()

    def forward(self, x):
        return self.head(self.net(x))

    def training_step(self, batch, batch_idx):
        loss = nn.functional.nll_loss(self(batch["x"]), batch["y"])
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.StepLR(opt, 2, 0.5),
                                                   "interval": "step"}}
'''

BATCH, BAD_STEP, BAD_ROW = 8, 5, 5


class Records(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(4)
        self.x, self.y = torch.randn(96, 8, generator=g), torch.randint(0, 3, (96,), generator=g)
        self.x[BAD_STEP * BATCH + BAD_ROW] *= 1e6  # a corrupt record: softmax underflows to exact zeros

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def test_lightning_capture_then_replay_names_op_module_and_sample(tmp_path, capsys):
    from lightning.pytorch.loggers import CSVLogger

    from forensics.capture.lightning import ForensicsCapture

    litmodel = user_module(tmp_path, "litmodel", MODULE_SOURCE)
    run = tmp_path / "run"
    torch.manual_seed(0)
    model = litmodel.LitClassifier()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = L.Trainer(max_steps=8, accelerator="cpu", devices=1, logger=CSVLogger(run), enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
                        gradient_clip_val=5.0, default_root_dir=run,
                        callbacks=[ForensicsCapture(run, every=3)])
    trainer.fit(model, torch.utils.data.DataLoader(Records(), batch_size=BATCH, shuffle=False))
    sys.modules.pop("litmodel", None)
    assert (run / "forensics_entry.py").is_file() and (run / "checkpoints" / "step_2.pt").is_file()
    assert (run / "batches" / f"step_{BAD_STEP}.pt").is_file()
    capsys.readouterr()  # Lightning's own messages: not ours
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    r = json.loads(out.out)
    assert r["from_checkpoint"] == "checkpoints/step_2.pt"
    assert r["fidelity"]["faithful"] and r["fidelity"]["verified"] and r["reproduced"]
    assert r["bad_step"] == BAD_STEP
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"], hit["module"]) == ("forward", "log", "head")
    assert hit["file"] == str(Path(litmodel.__file__).resolve())
    assert r["culprit_samples"] == [BAD_ROW]

    # the state before the first step, in Lightning's layout (state before logged step 0): probe starts there
    saved = torch.load(run / "checkpoints" / "epoch=0-step=0.ckpt", weights_only=True)
    assert saved["global_step"] == 0 and saved["state_dict"].keys() == initial.keys()
    assert all(torch.equal(saved["state_dict"][k], v) for k, v in initial.items())
    assert saved["optimizer_states"][0]["param_groups"][0]["lr"] == 0.01 and len(saved["lr_schedulers"]) == 1
    code = main(["probe", str(run), "--db", str(tmp_path / "f.duckdb"), "--device", "cpu", "--json",
                 "--checks", "output_head,initial_loss"])
    out = capsys.readouterr()
    assert code == 0, out.err
    p = json.loads(out.out)
    assert p["from_checkpoint"]["first"] == {"path": "checkpoints/epoch=0-step=0.ckpt", "step": 0}
    assert not any("no step-0 checkpoint" in n for n in p["notes"])
    init = next(c for c in p["checks"] if c["name"] == "initial_loss")
    assert init["status"] == "pass", init  # log(softmax) at initialisation: about log(3)
    assert init["evidence"]["classes"] == 3

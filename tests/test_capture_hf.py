"""The HF Trainer capture callback with the real transformers Trainer (CPU, a tiny PreTrainedModel): train until
a real NaN, then `forensics replay` with the generated entry point names the op, the module and the sample."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forensics.cli import main
from tests.runwriters import user_module

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="the test extra installs transformers")

MODEL_SOURCE = '''
import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


class TinyConfig(PretrainedConfig):
    model_type = "forensics_tiny_classifier"

    def __init__(self, d_in=8, hidden=16, classes=3, **kwargs):
        super().__init__(**kwargs)
        self.d_in, self.hidden, self.classes = d_in, hidden, classes


class LogSoftmaxByHand(nn.Module):
    def forward(self, z):
        return torch.log(torch.softmax(z, dim=-1))


class TinyClassifier(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config):
        super().__init__(config)
        self.net = nn.Sequential(nn.Linear(config.d_in, config.hidden), nn.ReLU(), nn.Linear(config.hidden, config.classes))
        self.head = LogSoftmaxByHand()
        self.post_init()

    def _init_weights(self, module):
        pass

    def forward(self, x, labels=None):
        logp = self.head(self.net(x))
        return {"loss": nn.functional.nll_loss(logp, labels), "logits": logp}
'''

BATCH, BAD_STEP, BAD_ROW = 8, 7, 2  # HF steps count from 1


def test_hf_capture_then_replay_names_op_module_and_sample(tmp_path, capsys):
    from transformers import Trainer, TrainingArguments

    from forensics.capture.hf import ForensicsCallback

    tinymodel = user_module(tmp_path, "tinymodel", MODEL_SOURCE)
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(96, 8, generator=g), torch.randint(0, 3, (96,), generator=g)
    x[(BAD_STEP - 1) * BATCH + BAD_ROW] *= 1e6  # a corrupt record: softmax underflows to exact zeros
    data = [{"x": x[i], "labels": y[i]} for i in range(96)]
    run = tmp_path / "run"
    torch.manual_seed(0)
    model = tinymodel.TinyClassifier(tinymodel.TinyConfig())
    args = TrainingArguments(output_dir=str(run), max_steps=9, per_device_train_batch_size=BATCH, learning_rate=0.01,
                             warmup_steps=2, logging_steps=1, save_steps=4, report_to=[], use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True, seed=0, data_seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[ForensicsCallback(keep=4)])
    trainer.train_dataloader = None
    trainer.get_train_dataloader = lambda: torch.utils.data.DataLoader(  # in order, so the bad row is known
        data, batch_size=BATCH, shuffle=False, collate_fn=transformers.default_data_collator)
    trainer.train()
    sys.modules.pop("tinymodel", None)
    assert (run / "forensics_entry.py").is_file() and (run / "checkpoint-4" / "optimizer.pt").is_file()
    assert (run / "checkpoints" / "step_0.pt").is_file()  # the state at initialisation, for forensics probe
    assert (run / "batches" / f"step_{BAD_STEP}.pt").is_file()
    capsys.readouterr()  # HF Trainer prints its log dicts: not ours
    code = main(["replay", str(run), "--db", str(tmp_path / "f.duckdb"), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    r = json.loads(out.out)
    assert r["from_checkpoint"] == "checkpoint-4" and "rng" in r["restored"] and "scheduler" in r["restored"]
    assert r["fidelity"]["faithful"] and r["fidelity"]["verified"] and r["reproduced"]
    assert r["bad_step"] == BAD_STEP
    hit = r["first_nonfinite"]
    assert (hit["phase"], hit["op"], hit["module"]) == ("forward", "log", "head")
    assert hit["file"] == str(Path(tinymodel.__file__).resolve())
    assert r["culprit_samples"] == [BAD_ROW]

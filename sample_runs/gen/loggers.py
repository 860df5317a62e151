"""Logger adapters over the real writers: every logger sees every step and keeps its own cadence.

A logger gets `train(step, metrics, wall)` once per optimizer step and `val(step, metrics, wall)` after each
evaluation; `metrics` use canonical names (loss, grad_norm, lr, val_loss, ...) that the logger maps to the
tags a user of that library would write. `wall` is the simulated clock (seconds since the epoch): the
gallery trains in milliseconds per step, so step times, stalls and restart gaps are simulated, and passed
to the writers that accept a time stamp (SummaryWriter's `walltime=`, console lines).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import time
from pathlib import Path

import yaml


class TensorBoard:
    """torch.utils.tensorboard.SummaryWriter; with `subfolders` the split goes in train/ and val/ folders
    (the same tag in both), else into the tag (`tags` maps canonical names to tags)."""

    def __init__(self, root: Path, tags: dict[str, str], every: int = 1, subfolders: bool = False,
                 logdir: str = "", val_tags: dict[str, str] | None = None):
        from torch.utils.tensorboard import SummaryWriter
        base = root / logdir if logdir else root
        self.tags, self.val_tags, self.every = tags, val_tags or tags, every
        self.logged = {}
        self.prefix = ("train/", "val/") if subfolders else ("", "")
        if subfolders:
            self.w_train = SummaryWriter(str(base / "train"))
            self.w_val = SummaryWriter(str(base / "val"))
        else:
            self.w_train = self.w_val = SummaryWriter(str(base))

    def train(self, step, metrics, wall):
        if step % self.every == 0:
            for k, v in metrics.items():
                if k in self.tags:
                    self.w_train.add_scalar(self.tags[k], v, step, walltime=wall)
                    self.logged.setdefault(self.prefix[0] + self.tags[k], {})[step] = float(v)

    def val(self, step, metrics, wall):
        for k, v in metrics.items():
            if k in self.val_tags:
                self.w_val.add_scalar(self.val_tags[k], v, step, walltime=wall)
                self.logged.setdefault(self.prefix[1] + self.val_tags[k], {})[step] = float(v)

    def close(self):
        self.w_train.close()
        self.w_val.close()


class Wandb:
    """wandb in offline mode, files under ROOT/wandb/offline-run-<time>-<id>/ (the id is pinned)."""

    def __init__(self, root: Path, run_id: str, config: dict, tags: dict[str, str], every: int = 1,
                 project: str = "gallery"):
        os.environ.update(WANDB_MODE="offline", WANDB_DIR=str(root), WANDB_SILENT="true",
                          WANDB_DISABLE_GIT="true")
        import wandb
        self.wandb, self.tags, self.every, self.logged, self.root, self.t0 = wandb, tags, every, {}, root, None
        self.run = wandb.init(project=project, id=run_id, name=run_id, config=config, dir=str(root),
                              settings=wandb.Settings(x_disable_stats=True, console="off",
                                                      save_code=False, disable_git=True))

    def train(self, step, metrics, wall):
        if step % self.every == 0:
            row = {self.tags[k]: v for k, v in metrics.items() if k in self.tags}
            if row:
                self.run.log({**row, **self._clock(wall)}, step=step)
                for k, v in row.items():
                    self.logged.setdefault(k, {})[step] = float(v)

    def val(self, step, metrics, wall):
        row = {self.tags[k]: v for k, v in metrics.items() if k in self.tags}
        if row:
            self.run.log({**row, **self._clock(wall)}, step=step)
            for k, v in row.items():
                self.logged.setdefault(k, {})[step] = float(v)

    def _clock(self, wall: float) -> dict:
        # wandb accepts user-supplied _timestamp/_runtime; the real clock would only record machine load
        if self.t0 is None:
            self.t0 = wall
        return {"_timestamp": wall, "_runtime": wall - self.t0}

    def close(self):
        self.run.finish()
        # wandb links logs/debug-core.log to a file in the user's cache (an absolute path outside the run):
        # drop that link so the committed run holds nothing that points off the repository
        for link in self.root.rglob("*"):
            if link.is_symlink() and os.path.isabs(os.readlink(link)):
                link.unlink()


@dataclasses.dataclass
class TrainerState:
    """The fields of transformers' TrainerState (v4.5x), serialised as its save_to_json does."""

    epoch: float | None = None
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: int | None = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: list = None
    best_metric: float | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: str | None = None
    trial_params: dict | None = None
    stateful_callbacks: dict | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    def save_to_json(self, json_path) -> None:
        """As HF's TrainerState.save_to_json writes the file."""
        Path(json_path).write_text(self.to_json(), encoding="utf-8")


class HFTrainer:
    """HF Trainer's logging: the mean loss over each `logging_steps` window rounded to 4 digits, with
    `logging_nan_inf_filter` (on by default): a non-finite step loss is replaced by the window's running
    average, so NaN never reaches `loss`; grad_norm is the last step's norm, unfiltered."""

    def __init__(self, root: Path, logging_steps: int, max_steps: int, steps_per_epoch: int,
                 batch_size: int, eval_steps: int, save_steps: int, nan_inf_filter: bool = True):
        self.root, self.nan_filter = root, nan_inf_filter
        self.spe = steps_per_epoch
        self.state = TrainerState(max_steps=max_steps, logging_steps=logging_steps, eval_steps=eval_steps,
                                  save_steps=save_steps, train_batch_size=batch_size,
                                  num_train_epochs=math.ceil(max_steps / steps_per_epoch), log_history=[],
                                  stateful_callbacks={"TrainerControl": {"args": {
                                      "should_epoch_stop": False, "should_evaluate": False,
                                      "should_log": False, "should_save": True,
                                      "should_training_stop": False}, "attributes": {}}})
        self.tr_loss, self.last_logged, self.total_loss = 0.0, 0, 0.0

    def train(self, step, metrics, wall):
        loss = metrics["loss"]
        if self.nan_filter and not math.isfinite(loss):
            self.tr_loss += self.tr_loss / (1 + step - 1 - self.last_logged)
        else:
            self.tr_loss += loss
        self.state.global_step, self.state.epoch = step, step / self.spe
        self.state.total_flos += 1.0e6
        if step % self.state.logging_steps == 0 or step == self.state.max_steps:
            window = step - self.last_logged
            entry = {"epoch": step / self.spe, "grad_norm": float(metrics["grad_norm"]),
                     "learning_rate": float(metrics["lr"]), "loss": round(self.tr_loss / window, 4), "step": step}
            self.total_loss += self.tr_loss
            self.state.log_history.append(entry)
            self.tr_loss, self.last_logged = 0.0, step

    def val(self, step, metrics, wall):
        self.state.log_history.append({"epoch": step / self.spe, "eval_loss": float(metrics["val_loss"]),
                                       "eval_runtime": 0.0412, "eval_samples_per_second": 6213.59,
                                       "eval_steps_per_second": 97.087, "step": step})
        v = float(metrics["val_loss"])
        if math.isfinite(v) and (self.state.best_metric is None or v < self.state.best_metric):
            self.state.best_metric, self.state.best_global_step = v, step

    @property
    def logged(self) -> dict:
        out = {}
        for e in self.state.log_history:
            for k, v in e.items():
                if k not in ("step", "epoch"):
                    out.setdefault(k, {})[e["step"]] = v
        return out

    def save_state(self, path: Path):
        path.write_text(self.state.to_json())

    def close(self, finished: bool = True):
        if finished:
            s = self.state.global_step
            self.state.log_history.append({
                "epoch": s / self.spe, "step": s, "total_flos": self.state.total_flos,
                "train_loss": self.total_loss / max(s, 1), "train_runtime": round(s * 0.05, 4),
                "train_samples_per_second": 1280.5, "train_steps_per_second": 20.01})
        self.save_state(self.root / "trainer_state.json")


class LightningCSV:
    """Lightning's CSVLogger: lightning_logs/version_0/metrics.csv (sorted union of keys, one row per
    log call, `step` 0-based = optimizer steps done - 1) and hparams.yaml."""

    def __init__(self, root: Path, hparams: dict, tags: dict[str, str], every: int, steps_per_epoch: int):
        self.dir = root / "lightning_logs" / "version_0"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "hparams.yaml").write_text(yaml.safe_dump(hparams, sort_keys=False))
        self.tags, self.every, self.spe, self.rows, self.logged = tags, every, steps_per_epoch, [], {}

    def train(self, step, metrics, wall):
        if step % self.every == 0:  # Lightning logs when (global_step) % log_every_n_steps == 0
            row = {self.tags[k]: v for k, v in metrics.items() if k in self.tags}
            row["epoch"] = (step - 1) // self.spe
            row["step"] = step - 1
            self.rows.append(row)
            for k, v in row.items():
                self.logged.setdefault(k, {})[step - 1] = v

    def val(self, step, metrics, wall):
        row = {self.tags[k]: v for k, v in metrics.items() if k in self.tags}
        row["epoch"] = (step - 1) // self.spe
        row["step"] = step - 1
        self.rows.append(row)
        for k, v in row.items():
            self.logged.setdefault(k, {})[step - 1] = v

    def close(self):
        keys = sorted({k for r in self.rows for k in r})
        with open(self.dir / "metrics.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)


class Console:
    """A train.log as a hand-written print loop leaves it (timestamps from the simulated clock)."""

    def __init__(self, root: Path, every: int, total: int):
        self.f = open(root / "train.log", "w")
        self.every, self.total, self.logged = every, total, {}

    def _stamp(self, wall):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall))

    def train(self, step, metrics, wall):
        if step % self.every == 0:
            self.logged.setdefault("loss", {})[step] = metrics["loss"]
            extra = "".join(f" | {k} {v:.4g}" for k, v in metrics.items() if k not in ("loss", "lr"))
            self.f.write(f"[{self._stamp(wall)}] step {step}/{self.total} | loss {metrics['loss']:.4f} | "
                         f"lr {metrics['lr']:.3e}{extra}\n")

    def val(self, step, metrics, wall):
        self.f.write(f"[{self._stamp(wall)}] eval @ step {step} | " +
                     " | ".join(f"{k} {v:.4f}" for k, v in metrics.items()) + "\n")

    def close(self):
        self.f.close()


def wandb_export(path: Path, run: str, losses: dict[int, float], steps: list[int]) -> None:
    """A W&B UI export of `train/loss` as the web page writes it: one row per sampled step (the UI's sampling),
    each with the value there and the MIN/MAX of the bucket since the previous row, every field quoted."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(["Step", f"{run} - train/loss", f"{run} - train/loss__MIN", f"{run} - train/loss__MAX"])
        prev = 0
        for s in steps:
            bucket = [losses[t] for t in range(prev + 1, s + 1)]
            w.writerow([s, losses[s], min(bucket), max(bucket)])
            prev = s

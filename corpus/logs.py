"""The logger sets a corpus run writes: the gallery's real-writer adapters, plus a user's own CSV and the console
copy W&B keeps beside its history (`files/output.log`). Each set names its primary logger, whose series the labels
use, and how each canonical metric is spelled there."""

from __future__ import annotations

import csv
import time
from pathlib import Path

from sample_runs.gen import loggers as gl

# canonical metric -> tag, per writer and style (the spellings real users pick)
TB_STYLES = (
    ({"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr"}, {"val_loss": "val/loss", "val_acc": "val/acc", "train_acc": "train/acc"}, False),
    ({"loss": "Loss/train", "grad_norm": "grad_norm", "lr": "LR"}, {"val_loss": "Loss/val", "val_acc": "Accuracy/val", "train_acc": "Accuracy/train"}, False),
    ({"loss": "loss", "grad_norm": "grad_norm", "lr": "lr"}, {"val_loss": "loss", "val_acc": "accuracy", "train_acc": "train_accuracy"}, True),
)
WB_STYLES = (
    {"loss": "train/loss", "grad_norm": "train/grad_norm", "lr": "train/lr", "val_loss": "val/loss", "val_acc": "val/acc", "train_acc": "train/acc"},
    {"loss": "loss", "grad_norm": "grad_norm", "lr": "lr", "val_loss": "val_loss", "val_acc": "val_accuracy", "train_acc": "accuracy"},
)


class CSVLog:
    """A user's own CSV (`log.csv`): one row per logged step, columns step, epoch, the train metrics, and the
    val metrics on the rows where an evaluation happened (written with csv.DictWriter at the end)."""

    def __init__(self, root: Path, every: int, steps_per_epoch: int, name: str = "log.csv"):
        self.path, self.every, self.spe = root / name, every, steps_per_epoch
        self.rows: dict[int, dict] = {}
        self.logged: dict[str, dict[int, float]] = {}

    def _row(self, step):
        return self.rows.setdefault(step, {"step": step, "epoch": (step - 1) // self.spe})

    def train(self, step, metrics, wall):
        if step % self.every == 0:
            for k in ("loss", "lr", "grad_norm"):
                if k in metrics:
                    self._row(step)[k] = float(metrics[k])
                    self.logged.setdefault(k, {})[step] = float(metrics[k])

    def val(self, step, metrics, wall):
        for k, v in metrics.items():
            self._row(step)[k] = float(v)
            self.logged.setdefault(k, {})[step] = float(v)

    def close(self):
        keys = ["step", "epoch"] + sorted({k for r in self.rows.values() for k in r} - {"step", "epoch"})
        with open(self.path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            for s in sorted(self.rows):
                w.writerow(self.rows[s])


class OutputLog:
    """What the training script printed, as W&B keeps it in `<run>/files/output.log` (console capture): one
    line per logged step with the epoch and the loss, and one per evaluation."""

    def __init__(self, path: Path, every: int, steps_per_epoch: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f, self.every, self.spe, self.logged = open(path, "w"), every, steps_per_epoch, {}

    def train(self, step, metrics, wall):
        if step % self.every == 0:
            ep = (step - 1) // self.spe
            self.f.write(f"Epoch {ep} | step {step} | loss: {metrics['loss']:.4f} | lr: {metrics['lr']:.3e}\n")

    def val(self, step, metrics, wall):
        self.f.write(f"Validation after step {step}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()) + "\n")

    def close(self):
        self.f.close()


class ConsoleLog(gl.Console):
    """The gallery's train.log, remembering every value a line prints as the line prints it (loss to 4 decimals,
    lr as %.3e, the other metrics to 4 significant digits), so the labels read what the file holds."""

    def train(self, step, metrics, wall):
        super().train(step, metrics, wall)
        if step % self.every == 0:
            self.logged["loss"][step] = float(f"{metrics['loss']:.4f}")
            self.logged.setdefault("lr", {})[step] = float(f"{metrics['lr']:.3e}")
            for k, v in metrics.items():
                if k not in ("loss", "lr"):
                    self.logged.setdefault(k, {})[step] = float(f"{v:.4g}")

    def val(self, step, metrics, wall):
        super().val(step, metrics, wall)  # `eval @ step N | val_loss 0.1234 | val_acc 0.9160`: 4 decimals
        for k, v in metrics.items():
            self.logged.setdefault(k, {})[step] = float(f"{v:.4f}")


class LoggerSet:
    """The run's writers; `primary` is the first, `tag(canonical)` its spelling, `series(canonical)` what it wrote."""

    def __init__(self, names, root: Path, *, seed: int, every: int, steps: int, spe: int, config: dict,
                 extra_tags: tuple[str, ...] = (), opt_name: str = "Adam", eval_every: int = 0):
        self.names, self.root, self.writers, self.tags = names, root, [], {}
        extra = {t: t for t in extra_tags}
        for i, name in enumerate(names):
            if name == "tensorboard":
                tr, va, sub = TB_STYLES[seed % 3] if not extra_tags else TB_STYLES[seed % 2]
                w = gl.TensorBoard(root, {**tr, **extra}, every=every, subfolders=sub, val_tags=va)
                tags = {k: ("train/" + v if sub else v) for k, v in {**tr, **extra}.items()}
                tags.update({k: ("val/" + v if sub else v) for k, v in va.items()})
            elif name == "wandb":
                t = {**WB_STYLES[seed % 2], **extra}
                w = gl.Wandb(root, f"c{seed:05d}", config, t, every=every, project="corpus")
                tags = t
            elif name == "output_log":
                wb = next(x for x in self.writers if isinstance(x, gl.Wandb))
                w, tags = OutputLog(Path(wb.run.dir) / "output.log", every, spe), {}
            elif name == "hf":
                w = gl.HFTrainer(root, logging_steps=every, max_steps=steps, steps_per_epoch=spe, batch_size=32,
                                 eval_steps=eval_every or steps, save_steps=steps)
                tags = {"loss": "loss", "grad_norm": "grad_norm", "lr": "learning_rate", "val_loss": "eval_loss"}
            elif name == "lightning":
                t = {"loss": "train_loss", "lr": f"lr-{opt_name}", "grad_norm": "grad_2.0_norm_total",
                     "val_loss": "val_loss", "val_acc": "val_acc", "train_acc": "train_acc", **extra}
                w = gl.LightningCSV(root, config, t, every=every, steps_per_epoch=spe)
                tags = t
            elif name == "csv":
                w = CSVLog(root, every, spe)
                tags = {k: k for k in ("loss", "lr", "grad_norm", "val_loss", "val_acc", "train_acc")}
            elif name == "console":
                w = ConsoleLog(root, every=every, total=steps)
                tags = {"loss": "loss", "lr": "lr", "grad_norm": "grad_norm", "val_loss": "val_loss",
                        "val_acc": "val_acc", **extra}
            else:
                raise ValueError(name)
            self.writers.append(w)
            if i == 0:
                self.tags = tags
        self.primary = self.writers[0]

    def tag(self, canonical: str) -> str | None:
        return self.tags.get(canonical)

    def series(self, canonical: str) -> dict[int, float]:
        """What the primary writer wrote for a canonical metric, keyed by its logged step."""
        t = self.tag(canonical)
        return dict(self.primary.logged.get(t, {})) if t else {}

    def close(self):
        for w in self.writers:
            w.close()


def stamp(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall))

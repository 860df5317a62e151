"""Runs written by the real TensorBoard writer into tmp_path, ingested through the real ingest path, for detector tests."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from forensics.judge.run import Run

STAMPED = "%(asctime)s %(levelname)s %(message)s"


def sgd_losses(steps: int, seed: int = 0, lr: float = 0.05, blow_up_at: int | None = None) -> list[float]:
    """Per-step losses of SGD on a small regression, as a real torch loop prints them; from `blow_up_at` on the LR
    is raised until the loss overflows to inf/nan, as a run that diverges does."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
    out = []
    for i in range(steps):
        if blow_up_at is not None and i >= blow_up_at:
            for g in opt.param_groups:
                g["lr"] = 1e6
        loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


@contextlib.contextmanager
def logger_writing(to, fmt: str = STAMPED, datefmt: str | None = None, encoding: str | None = None,
                   name: str = "train"):
    """Python's logger `name` writing records formatted by `fmt` and `datefmt` to `to`, as a training script's logger
    writes them: a path (appended, as a script launched again does; in `encoding`, the handler's default if None) or an
    open text stream. The handler is closed and detached on exit."""
    import logging

    logger = logging.getLogger(name)
    logger.propagate = False
    handler = logging.FileHandler(to, encoding=encoding) if isinstance(to, (str, Path)) else logging.StreamHandler(to)
    handler.setFormatter(logging.Formatter(fmt, datefmt))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield logger
    finally:
        handler.close()
        logger.removeHandler(handler)


def log_messages(path: Path, messages, fmt: str = STAMPED, encoding: str | None = None,
                 datefmt: str | None = None) -> Path:
    """`messages` written to `path` by Python's logging with `fmt` and `datefmt` (see `logger_writing`), under the
    logger name `train` (a `%(name)s` in `fmt` prints it)."""
    with logger_writing(path, fmt, datefmt, encoding) as logger:
        for m in messages:
            logger.info(m)
    return path


def write_tb(root: Path, series: dict[str, tuple[np.ndarray, np.ndarray]], config: dict | None = None) -> Path:
    """Write each tag's (steps, values) with torch.utils.tensorboard.SummaryWriter; NaN/Inf kept as logged."""
    from torch.utils.tensorboard import SummaryWriter

    root.mkdir(parents=True, exist_ok=True)
    w = SummaryWriter(log_dir=str(root))
    for tag, (steps, values) in series.items():
        for s, v in zip(np.asarray(steps).tolist(), np.asarray(values, dtype=float).tolist()):
            w.add_scalar(tag, v, global_step=int(s))
    w.close()
    if config:
        import json
        (root / "config.json").write_text(json.dumps(config))
    return root


def load_run(root: Path, db: Path) -> Run:
    """Ingest `root` into `db` and open it as a Run (the connection stays open for the test's lifetime)."""
    import duckdb

    from ingest.run import ingest_run

    report = ingest_run(root, db)
    con = duckdb.connect(str(db), read_only=True)
    return Run.from_store(con, report.run_id)


def curve(n: int = 300, every: int = 10, seed: int = 0, start: float = 2.3, floor: float = 0.2, tau: float = 800.0,
          noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """A healthy decaying loss: steps 0, every, 2·every, ... with multiplicative noise."""
    rng = np.random.default_rng(seed)
    steps = np.arange(n) * every
    values = (floor + (start - floor) * np.exp(-steps / tau)) * (1 + rng.normal(0, noise, n))
    return steps, values


def write_trainer_state(root: Path, history: list[dict], config: dict | None = None) -> Path:
    """`trainer_state.json` as HF's TrainerState.save_to_json writes it (NaN/Infinity tokens included), with
    `history` as log_history; `config` (e.g. max_grad_norm) goes to a `config.yaml` beside it, as a user's
    training script saves its arguments (HF's own training_args.bin is a pickle the ingest does not open)."""
    from tests.writers import TrainerState

    root.mkdir(parents=True, exist_ok=True)
    last = max((e["step"] for e in history), default=0)
    TrainerState(epoch=history[-1].get("epoch") if history else None, global_step=last, max_steps=last,
                 logging_steps=10, train_batch_size=8, num_train_epochs=1, log_history=history,
                 stateful_callbacks={"TrainerControl": {"args": {"should_save": True}, "attributes": {}}},
                 ).save_to_json(root / "trainer_state.json")
    if config:
        import yaml
        (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def hf_history(steps: np.ndarray, loss: np.ndarray, grad_norm: np.ndarray, lr: float = 5e-5,
               per_epoch: int = 1000) -> list[dict]:
    """HF Trainer's training log entries, keys in the order it logs them: loss, grad_norm, learning_rate,
    epoch, step (plain floats; NaN/Inf stay NaN/Inf, as `json.dumps` writes them)."""
    return [{"loss": float(v), "grad_norm": float(g), "learning_rate": lr, "epoch": round(int(s) / per_epoch, 4),
             "step": int(s)} for s, v, g in zip(steps, loss, grad_norm)]


def hf_toy():
    """(dataset, model) for a real `transformers.Trainer`: 64 pairs of 4 features summed into a target, and a linear
    regression returning `{"loss", "logits"}` as HF models do."""
    import torch
    from torch.utils.data import Dataset

    class Pairs(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            x = torch.full((4,), float(i) / 64)
            return {"x": x, "labels": x.sum()}

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            y = self.lin(x).squeeze(-1)
            return {"loss": torch.nn.functional.mse_loss(y, labels), "logits": y}

    return Pairs(), Tiny()


@contextlib.contextmanager
def hf_console(path: Path):
    """transformers' INFO messages and stdout both written to `path`, as `python train.py > train.log 2>&1` leaves
    an HF Trainer's console log; the logger's level and handlers are restored after."""
    import logging

    import transformers

    logger = transformers.logging.get_logger()
    level = logger.level
    with open(path, "w") as log, contextlib.redirect_stdout(log):
        handler = logging.StreamHandler(log)
        transformers.logging.set_verbosity_info()
        logger.addHandler(handler)
        try:
            yield log
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)


class one_torch_thread:
    """Run tiny torch work on one thread: on a shared 2-core machine, torch's thread pool fights the other
    processes and a 30-step toy training takes seconds instead of a fraction of one."""

    def __enter__(self):
        import torch

        self._n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self._n)


def user_module(tmp_path: Path, name: str, source: str):
    """A user's model file, written to tmp_path/project/NAME.py and imported as NAME, as a training script would
    (the capture callbacks record where the model's class lives, so the generated entry point imports it)."""
    import importlib
    import sys

    src = tmp_path / "project" / f"{name}.py"
    src.parent.mkdir(exist_ok=True)
    src.write_text(source)
    sys.path.insert(0, str(src.parent))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(src.parent))


def entry_run(root: Path, entry: str, config: dict) -> tuple[dict, object, object]:
    """A run folder as `replay` finds it: `config.json`, the entry point `entry` (forensics_entry.py) and empty
    checkpoints/ and batches/ folders; returns the entry point's namespace and the model and optimizer it builds from
    `config`, for the test's own training loop to write the run with."""
    import json

    root.mkdir()
    (root / "config.json").write_text(json.dumps(config))
    (root / "forensics_entry.py").write_text(entry)
    ns: dict = {}
    exec(entry, ns)
    model = ns["build_model"](config)
    opt = ns["build_optimizer"](model, config)
    (root / "checkpoints").mkdir()
    (root / "batches").mkdir()
    return ns, model, opt

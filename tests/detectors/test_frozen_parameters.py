"""frozen_parameters on consecutive checkpoints of a real (tiny) training loop: torch.save of model and
optimizer state dicts, and HF-style `checkpoint-N/model.safetensors` folders."""

from forensics.judge.detectors import FrozenParameters
from tests.runwriters import load_run, one_torch_thread


def _train(root, layout: str = "torch", frozen: bool = False, not_in_optimizer: bool = False, saves=(10, 20, 30),
           lr: float = 1e-2, buffers: bool = False) -> None:
    """Train a tiny MLP with AdamW; `frozen` sets requires_grad=False on the first layer, `not_in_optimizer`
    leaves the last layer out of the optimizer's parameter list; `buffers` registers the constant float buffers
    real models save with their weights (nanoGPT's causal `attn.bias` of ones and zeros, GPT-2's scalar
    `masked_bias`). Saves at the steps in `saves`."""
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    if frozen:
        model[0].requires_grad_(False)
    if buffers:
        model[2].register_buffer("attn_bias", torch.tril(torch.ones(6, 6)).view(1, 1, 6, 6))
        model[2].register_buffer("masked_bias", torch.tensor(-1e4))
    params = [p for n, p in model.named_parameters() if not (not_in_optimizer and n.startswith("2."))]
    opt = torch.optim.AdamW([p for p in params if p.requires_grad], lr=lr)
    x = torch.randn(64, 8)
    y = x.sum(dim=1, keepdim=True)
    with one_torch_thread():
        for step in range(1, max(saves) + 1):
            opt.zero_grad()
            (model(x) - y).pow(2).mean().backward()
            opt.step()
            if step not in saves:
                continue
            if layout == "torch":
                (root / "ckpt").mkdir(parents=True, exist_ok=True)
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                           root / "ckpt" / f"step_{step}.pt")
            else:  # HF Trainer's folder; the step comes from its trainer_state.json
                ck = root / f"checkpoint-{step}"
                ck.mkdir(parents=True)
                save_file(model.state_dict(), ck / "model.safetensors", metadata={"format": "pt"})
                torch.save(opt.state_dict(), ck / "optimizer.pt")
                from tests.writers import TrainerState
                TrainerState(global_step=step, max_steps=max(saves), log_history=[]).save_to_json(ck / "trainer_state.json")


def test_fires_on_a_layer_left_with_requires_grad_false(tmp_path):
    _train(tmp_path / "r", frozen=True)
    [f] = FrozenParameters().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))
    assert f.kind == "frozen_parameters" and f.step == 10 and f.step_end == 30
    assert sorted(p.split("model.")[-1] for p in f.evidence["parameters"]) == ["0.bias", "0.weight"]
    assert f.evidence["n_frozen"] == 2 and f.evidence["n_parameters"] == 4


def test_fires_on_hf_checkpoints_with_a_layer_missing_from_the_optimizer(tmp_path):
    _train(tmp_path / "r", layout="hf", not_in_optimizer=True)
    [f] = FrozenParameters().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))
    assert sorted(f.evidence["parameters"]) == ["2.bias", "2.weight"] and f.step == 10 and f.step_end == 30


def test_every_parameter_training_is_silent(tmp_path):
    _train(tmp_path / "r")
    assert list(FrozenParameters().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []


def test_a_single_checkpoint_is_skipped_not_silent(tmp_path):
    _train(tmp_path / "r", frozen=True, saves=(10,))
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    assert "two or more checkpoints" in FrozenParameters().unavailable(run)


def test_constant_buffers_saved_with_the_weights_are_not_frozen_parameters(tmp_path):
    """A causal mask of ones and zeros and a scalar constant never change: they are buffers by design, which a
    state_dict cannot tell from parameters."""
    _train(tmp_path / "r", buffers=True)
    assert list(FrozenParameters().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))) == []

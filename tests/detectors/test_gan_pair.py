"""A GAN's two losses judged as a pair (detectors.adversarial): console logs printed by a tiny real GAN, in the
line format of PyTorch's DCGAN example (`[e/E][b/B] Loss_D: x Loss_G: y`)."""

import pytest

from forensics.judge.detectors import Divergence, LossSpike
from forensics.judge.detectors.base import missing_reason
from tests.runwriters import load_run, one_torch_thread


def _gan_log(root, d_lr: float, g_lr: float, epochs: int, d_logit_scale: float = 1.0) -> None:
    """Train a tiny GAN on a 2-D Gaussian with BCELoss (non-saturating generator loss) and write its DCGAN-style
    lines to root/train.log every 5 of 20 batches. A fast discriminator against a slow generator wins; a
    `d_logit_scale` far above 1 (a temperature applied the wrong way round) saturates its sigmoid."""
    import torch
    from torch import nn

    class Scaled(nn.Module):
        def forward(self, x):
            return x * d_logit_scale

    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    disc = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1), Scaled(), nn.Sigmoid())
    opt_d = torch.optim.Adam(disc.parameters(), lr=d_lr, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=g_lr, betas=(0.5, 0.999))
    bce = nn.BCELoss()
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    lines = []
    with one_torch_thread():
        for epoch in range(epochs):
            for i in range(20):
                real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
                fake = gen(torch.randn(64, 4))
                opt_d.zero_grad()
                loss_d = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
                loss_d.backward()
                opt_d.step()
                opt_g.zero_grad()
                loss_g = bce(disc(fake), ones)
                loss_g.backward()
                opt_g.step()
                if i % 5 == 0:
                    lines.append(f"[{epoch}/{epochs}][{i}/20] Loss_D: {loss_d.item():.4f} Loss_G: {loss_g.item():.4f}")
    root.mkdir()
    (root / "train.log").write_text("\n".join(lines) + "\n")


def test_a_discriminator_that_wins_is_a_diverged_game_not_a_spike(tmp_path):
    """The discriminator learns 5000× faster than the generator: its loss falls to ~0 while the generator's climbs
    from ~2 to ~14 and stays. One divergence of the pair; the generator's climb is no loss spike."""
    _gan_log(tmp_path / "r", d_lr=0.05, g_lr=1e-5, epochs=30)
    run = load_run(tmp_path / "r", tmp_path / "f.duckdb")
    [f] = Divergence().check(run)
    assert f.evidence["shape"] == "discriminator_wins" and f.series == "Loss_G"
    assert f.evidence["discriminator_end"] < 0.01 and f.evidence["generator_end"] > 10
    assert "GAN run" in missing_reason(LossSpike(), run)


def test_a_saturated_discriminator_drives_the_generator_to_the_bce_clamp(tmp_path):
    """Logits ×10^4 before the sigmoid: most fakes get an output of exactly 0, and the generator's loss climbs to
    ~90 of BCELoss's clamp of 100 while the discriminator's stays well above 0."""
    _gan_log(tmp_path / "r", d_lr=2e-4, g_lr=2e-4, epochs=10, d_logit_scale=1e4)
    [f] = Divergence().check(load_run(tmp_path / "r", tmp_path / "f.duckdb"))
    assert f.evidence["generator_at_bce_clamp"] and f.evidence["generator_end"] >= 50
    assert "half or more of BCELoss's clamp" in f.summary


def test_a_balanced_gan_is_healthy_and_says_its_losses_were_judged_as_a_pair(tmp_path):
    """Balanced learning rates: the discriminator stays near 2·ln 2 and the generator near ln 2. No finding, and the
    verdict is healthy (not inconclusive for the detectors the pair leaves out), saying how the losses were read."""
    from forensics.services.analysis import analyze

    _gan_log(tmp_path / "r", d_lr=5e-4, g_lr=1e-3, epochs=30)
    result = analyze(tmp_path / "r", tmp_path / "f.duckdb")
    assert result.findings == [] and result.verdict == "healthy"
    assert "judged as a pair" in result.verdict_reason


@pytest.mark.parametrize("names", [("Loss_G", "Loss_D"), ("g_loss", "d_loss"), ("gen_loss", "disc_loss"),
                                   ("Generator loss", "Discriminator loss"), ("errG", "errD"),
                                   ("loss_gen", "loss_dis")])
def test_the_pair_is_found_by_its_names(tmp_path, names):
    from forensics.judge.detectors.base import gan_pair

    root = tmp_path / "r"
    root.mkdir()
    g, d = names
    (root / "train.log").write_text("\n".join(f"step {i} {g}: {0.7 + 0.01 * i:.3f} {d}: {1.38 - 0.01 * i:.3f}"
                                              for i in range(10)) + "\n")
    pair = gan_pair(load_run(root, tmp_path / "f.duckdb"))
    assert pair is not None and (pair.generator, pair.discriminator) == names


def test_a_discriminator_loss_at_zero_alone_is_a_met_margin_not_bce_saturation(tmp_path):
    """A relativistic-hinge GAN's log: the discriminator's loss exactly 0.0000 at every record (its margins met, as
    a hinge loss allows) while the generator's stays bounded around 9: no BCE signature (no value at the clamp of
    50 or 100, no generator climbing), so no diverged game. The same discriminator beside a generator at the clamp
    of 100 is BCE saturation."""
    from tests.runwriters import log_messages

    g = [9.19, 9.54, 8.53, 8.90, 18.48, 7.38, 9.02, 8.71, 10.3, 9.66, 8.12, 9.4]
    for name, gen in (("hinge", g), ("bce", [100.0] * len(g))):
        root = tmp_path / name
        root.mkdir()
        log_messages(root / "train.log", [f"[0/5][{50 * i}/600] Loss_D: 0.0000 Loss_G: {v:.4f}" for i, v in enumerate(gen)])
        found = list(Divergence().check(load_run(root, tmp_path / f"{name}.duckdb")))
        assert (found == []) if name == "hinge" else (found[0].evidence["shape"] == "loss_at_bce_saturation")


# An attentive-GAN deraining net trained from scratch, glog lines of its train_model.py
# (https://github.com/MaybeShewill-CV/attentive-gan-derainnet/issues/1): the generator's loss grows by orders of
# magnitude at every epoch, turns inf, then both losses are nan; the discriminator's stays at its scale throughout
DERAIN_BLOW_UP = """\
I0907 12:21:20.068805 22418 train_model.py:144] Training from scratch
I0907 12:21:31.173571 22418 train_model.py:199] Epoch: 0 D_loss: 0.58040 G_loss: 112.36253 Ssim: -0.00274 Cost_time: 6.89916s
I0907 12:21:32.760401 22418 train_model.py:199] Epoch: 1 D_loss: 1.32604 G_loss: 244.45976 Ssim: 0.01849 Cost_time: 0.55185s
I0907 12:21:33.305763 22418 train_model.py:199] Epoch: 2 D_loss: 2.09662 G_loss: 3334.70142 Ssim: 0.03258 Cost_time: 0.54503s
I0907 12:21:33.864548 22418 train_model.py:199] Epoch: 3 D_loss: 1.15596 G_loss: 22600.34570 Ssim: -0.00045 Cost_time: 0.55843s
I0907 12:21:34.411998 22418 train_model.py:199] Epoch: 4 D_loss: 0.46043 G_loss: 143877.51562 Ssim: -0.00022 Cost_time: 0.54708s
I0907 12:21:34.967912 22418 train_model.py:199] Epoch: 5 D_loss: 8.88247 G_loss: 2506968.25000 Ssim: 0.00032 Cost_time: 0.55560s
I0907 12:21:35.513916 22418 train_model.py:199] Epoch: 6 D_loss: 0.86375 G_loss: 11050401398784.00000 Ssim: 0.00000 Cost_time: 0.54586s
I0907 12:21:36.065352 22418 train_model.py:199] Epoch: 7 D_loss: 10.04829 G_loss: 7430020006188193046925154451456.00000 Ssim: 0.00000 Cost_time: 0.55113s
I0907 12:21:36.615558 22418 train_model.py:199] Epoch: 8 D_loss: 4.36992 G_loss: inf Ssim: 0.01403 Cost_time: 0.55008s
I0907 12:21:37.156896 22418 train_model.py:199] Epoch: 9 D_loss: nan G_loss: nan Ssim: 0.00493 Cost_time: 0.55000s
"""


def test_a_generator_loss_blown_up_by_orders_of_magnitude_is_a_diverged_game(tmp_path):
    """Neither side wins (the discriminator's loss never falls): the generator's loss ends ×6.6e28 its first value
    before it turns inf. The same log cut before the blow-up (the generator ×30 its first value) says nothing."""
    for name, text in (("a", DERAIN_BLOW_UP), ("b", "".join(DERAIN_BLOW_UP.splitlines(True)[:4]))):
        (tmp_path / name / "r").mkdir(parents=True)
        (tmp_path / name / "r" / "log.txt").write_text(text)
    [f] = Divergence().check(load_run(tmp_path / "a" / "r", tmp_path / "a.duckdb"))
    assert f.severity == "critical" and f.series == "G_loss" and f.evidence["ends_nonfinite"]
    assert f.evidence["final_level"] == pytest.approx(7.430020006188193e30)
    assert f.evidence["initial_level"] == pytest.approx(112.36253)
    assert list(Divergence().check(load_run(tmp_path / "b" / "r", tmp_path / "b.duckdb"))) == []

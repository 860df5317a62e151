"""Series names from many conventions map to the roles detectors ask for."""

import pytest

from ingest.roles import role_of


@pytest.mark.parametrize(
    ("name", "role", "split"),
    [
        ("loss", "train_loss", None),
        ("train/loss", "train_loss", "train"),
        ("Loss/train", "train_loss", "train"),
        ("train_loss_epoch", "train_loss", "train"),
        ("eval_loss", "val_loss", "val"),
        ("val/loss", "val_loss", "val"),
        ("test_loss", "val_loss", "test"),
        ("grad_norm", "grad_norm", None),
        ("train/grad_norm", "grad_norm", "train"),
        ("Vali Loss", "val_loss", "val"),  # Time-Series-Library prints `Train Loss: x Vali Loss: y Test Loss: z`
        ("learning_rate", "lr", None),
        ("lr-AdamW", "lr", None),
        ("lr-Adam/pg1", "lr", None),
        ("loss_scale", "loss_scale", None),
        ("train/grad_scale", "loss_scale", "train"),
        ("amp/scale", "loss_scale", None),  # mixed precision's scale under its own namespace
        ("cur_scale", "loss_scale", None),  # DeepSpeed's dynamic scaler attribute
        ("min_loss_scale", "other", None),  # a scaler's setting, not a scale it reached
        ("BoxScaleLoss", "train_loss", None),  # GluonCV YOLOv3's box-scale loss term, no loss scale
        ("loss_scale_window", "other", None),
        ("img_scale", "other", None),  # an augmentation's scale
        ("system/gpu.0.memoryAllocated", "memory", None),
        ("train_samples_per_second", "throughput", "train"),
        ("val_acc", "val_accuracy", "val"),
        ("eval_accuracy", "val_accuracy", "val"),
        ("train/accuracy", "accuracy", "train"),
        ("weight_norm", "weight_norm", None),
        ("epoch", "epoch", None),
        ("total_flos", "other", None),
        ("IDLoss", "train_loss", None),  # byteps console logs: camel case with an acronym
        ("valLoss", "val_loss", "val"),
        ("grad_2.0_norm_total", "grad_norm", None),  # Lightning's grad_norm(norm_type=2): 2.0 names no layer
        ("epoch_time", "step_time", None),  # console `time this epoch= 2.68`
        ("gnorm", "grad_norm", None),  # fairseq: the total gradient norm before clipping
        ("train/gnorm", "grad_norm", "train"),
        ("clip", "clip_rate", None),  # fairseq: percentage of updates clipped (`clip=100%`)
        ("train/clip", "clip_rate", "train"),
        ("grad_clip", "clip_threshold", None),  # a threshold, not a rate
        ("train/clip_fraction", "other", "train"),  # PPO (stable-baselines3): clipped policy ratios
        # names of a loss without the word `loss` (MXNet's metrics, LLaMA2-Accessory's `closs`)
        ("CrossEntropy", "train_loss", None),
        ("Train-CrossEntropy", "train_loss", "train"),
        ("Validation-CrossEntropy", "val_loss", "val"),
        ("cross-entropy", "train_loss", None),
        ("xent", "train_loss", None),
        ("closs", "train_loss", None),
        ("total loss", "train_loss", None),
        ("Train-Perplexity", "other", "train"),  # exp(loss): a loss detector's thresholds do not hold on it
        # rates named by their unit (console `2.51s/it`, word_language_model's `ms/batch 45.37`)
        ("s/it", "step_time", None),
        ("sec/step", "step_time", None),
        ("ms/batch", "step_time", None),
        ("iter_dt ms", "step_time", None),  # minGPT's `iter_dt 17397.85ms`
        # a bare time column is the step's own (PyTorch's ImageNet example, deepspeech.pytorch, nanoGPT's `time`)
        ("Time", "step_time", None),
        ("time", "step_time", None),
        ("time_ms", "step_time", None),
        ("itime", "step_time", None),  # PIPs' iteration time, printed beside its data-read `rtime`
        ("rtime", "other", None),
        ("number of skipped iterations", "skipped_steps", None),  # Megatron, per log interval
        ("number of nan iterations", "other", None),
        ("skip_connections", "other", None),
        ("Data", "other", None),  # the same lines' data-loading time: a part of the step, not the step
        ("data_time", "other", None),
        ("Wall Clock", "other", None),
        ("train_runtime", "other", "train"),
        ("it/s", "throughput", None),
        ("samples/sec", "throughput", None),
        ("Speed", "throughput", None),  # MXNet's Speedometer: `Speed: 512 samples/sec`
        ("peak GB", "memory", None),  # console `peak 2.1 GB`: the reader keeps the unit in the tag
        ("max mem", "memory", None),
        # a line that says what the epoch did: `Epoch 3 trained with loss: 0.02` / `Epoch 3 evaluated with loss: ..`
        ("trained with loss", "train_loss", "train"),
        ("evaluated with loss", "val_loss", "val"),
        ("validated loss", "val_loss", "val"),
        ("tested loss", "val_loss", "test"),
        ("tested", "other", "test"),  # `Saved trial: trained=0.000, tested=0.000`: a participle alone names no loss
        ("trained", "other", "train"),
    ],
)
def test_role_of_common_names(name, role, split):
    r = role_of(name)
    assert (r.role, r.split) == (role, split)


@pytest.mark.parametrize(
    ("name", "role", "layer"),
    [
        ("grad_norm/fc1.weight", "layer_grad_norm", "fc1.weight"),
        ("activations/fc1/dead_fraction", "dead_fraction", "fc1"),
        ("weight_norm/encoder.layer.0", "layer_weight_norm", "encoder.layer.0"),
        ("grad_2.0_norm/fc1.weight", "layer_grad_norm", "fc1.weight"),
        ("grad_norm/0.weight", "layer_grad_norm", "0.weight"),  # an integer index names a layer
    ],
)
def test_per_layer_series_name_their_layer(name, role, layer):
    r = role_of(name)
    assert (r.role, r.layer) == (role, layer)


def test_main_loss_is_canonical_and_components_are_not():
    assert role_of("train/loss").canonical
    assert not role_of("recon_loss").canonical


@pytest.mark.parametrize(("name", "role", "canonical"), [("Totalloss", "train_loss", True), ("valloss", "val_loss", True),
                                                       ("CTCloss", "train_loss", False), ("lossless", "other", False)])
def test_a_loss_glued_to_the_word_before_it_is_read_as_two_words(name, role, canonical):
    """`Totalloss: 51.62 CTCloss: 51.39` (a print with no separator): the total is the run's loss, its part is not."""
    r = role_of(name)
    assert (r.role, r.canonical) == (role, canonical)


@pytest.mark.parametrize("name", ["train/grad_norm_preclip", "grad_norm_before_clip", "total_norm", "grad_norm/total",
                                  "train/total_norm", "optimizer/grad_norm", "gradient_norm_pre_clip"])
def test_clip_qualified_gradient_norms_are_gradient_norms_not_layers(name):
    """Issue 25: `train/grad_norm_preclip` was read as the gradient norm of a layer named `grad_norm_preclip`."""
    r = role_of(name)
    assert (r.role, r.layer, r.canonical) == ("grad_norm", None, True)


def test_gradient_norm_after_clipping_is_not_the_runs_gradient_norm():
    """A norm taken after clipping is capped at max_norm: a gradient norm, but not the canonical one."""
    r = role_of("grad_norm_clipped")
    assert (r.role, r.layer, r.canonical) == ("grad_norm", None, False)
    assert role_of("grad_norm/fc1.weight").layer == "fc1.weight"  # a real layer still names itself


@pytest.mark.parametrize("name", ["max_grad_norm", "train/max_grad_norm", "grad_norm_max", "grad_norm/std",
                                  "min_grad_norm", "weight_norm/max"])
def test_a_statistic_of_norms_is_neither_a_layer_nor_the_runs_norm(name):
    """`max_grad_norm` (HF's clipping threshold, or the largest layer's norm) was read as a layer named
    `max_grad_norm`, and would have stood in the layer table as the worst layer."""
    r = role_of(name)
    assert (r.role, r.layer) == ("other", None)


def test_a_layer_named_after_a_statistic_word_with_more_words_is_still_a_layer():
    r = role_of("grad_norm/max_pool.weight")
    assert (r.role, r.layer) == ("layer_grad_norm", "max_pool.weight")


# ---- losses printed without the word, and numbers about a loss that are not it (console grammar)


@pytest.mark.parametrize("name", ["cost", "objective", "Batch Energy", "nll", "xent", "total_loss", "main/loss",
                                  "Train-SmoothL1", "l_pix", "TD Error_0", "Losses total", "Losses ner", "box",
                                  "obj", "cls", "dfl", "D_A", "G_A", "d_real", "g_adv", "errD", "d", "gen"])
def test_losses_named_without_the_word_are_training_losses(name):
    assert role_of(name).role == "train_loss"


@pytest.mark.parametrize("name", ["min_loss", "best_loss", "LOSS_WEIGHT", "FOCAL_LOSS_GAMMA", "loss_weight",
                                  "FED_LOSS_NUM_CLASSES", "l1_w", "Time cost", "Score", "score", "D(x)", "total",
                                  "F1 Score", "IoU threshold"])
def test_settings_extremes_and_lookalikes_are_not_the_loss(name):
    assert role_of(name).role != "train_loss"


def test_a_validation_loss_named_without_the_word_is_a_validation_loss():
    assert role_of("val_cost").role == "val_loss" and role_of("Valid Losses total").role == "val_loss"


@pytest.mark.parametrize("name", ["train_G", "train_D", "G_train", "Train D", "train_generator", "trainD"])
def test_a_gan_network_named_under_the_training_split_is_a_training_loss(name):
    assert role_of(name).role == "train_loss"


@pytest.mark.parametrize("name", ["val_D", "test_G", "val_gen"])
def test_a_gan_network_named_under_a_held_out_split_is_a_held_out_loss(name):
    assert role_of(name).role == "val_loss"

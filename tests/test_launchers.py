"""A launcher script kept in the run folder (`run.sh`): the settings its trainer command declares are the run's
config; commented lines, commands that start no trainer and settings two commands disagree on are not."""

from __future__ import annotations

import numpy as np

from ingest.launchers import declared
from tests.runwriters import hf_history, load_run, write_trainer_state

SCRIPT = """export MODEL_PATH='Qwen/Qwen1.5-0.5B-Chat'
export SAVE_PATH='./output'
# export CUDA_VISIBLE_DEVICES=1
    # torchrun --nproc_per_node=1 train_math.py --lr_scheduler_type constant \\
    deepspeed --include localhost:1 train_math.py --deepspeed ds_config.json\\
    --model_name_or_path $MODEL_PATH \\
    --output_dir ${SAVE_PATH} \\
    --bf16 True \\
    --lr_scheduler_type "cosine" \\
    --learning_rate 2e-5 \\
    --warmup-ratio 0.03 \\
    --gradient_checkpointing \\
    # --fsdp "full_shard auto_wrap" \\

# python eval_gsm8k.py --model $SAVE_PATH --learning_rate 1
mkdir -p --mode 755 out
"""


def test_a_launcher_s_trainer_command_declares_the_run_s_settings():
    got = declared(SCRIPT)
    assert got["lr_scheduler_type"] == "cosine" and got["learning_rate"] == 2e-5 and got["warmup_ratio"] == 0.03
    assert got["model_name_or_path"] == "Qwen/Qwen1.5-0.5B-Chat" and got["output_dir"] == "./output"
    assert got["bf16"] is True and got["gradient_checkpointing"] is True and got["deepspeed"] == "ds_config.json"
    assert "fsdp" not in got and "mode" not in got and "model" not in got  # comments; a command that trains nothing


def test_a_setting_two_commands_disagree_on_is_left_out():
    got = declared("python train.py --lr 0.1 --epochs 3\npython train.py --lr 0.01 --epochs 3\n")
    assert got == {"epochs": 3}


def test_a_run_folder_s_launcher_is_its_config(tmp_path):
    """HF's trainer_state.json holds no arguments: the scheduler the run was told to use is in its run.sh."""
    root = tmp_path / "r"
    steps = np.arange(1, 41)
    history = hf_history(steps, 1.0 / np.sqrt(steps), np.full(40, 8.0), lr=2e-5)
    write_trainer_state(root, history)
    (root / "run.sh").write_text(SCRIPT)
    run = load_run(root, tmp_path / "f.duckdb")
    assert run.config("lr_scheduler_type") == "cosine" and run.config_number("warmup_ratio") == 0.03

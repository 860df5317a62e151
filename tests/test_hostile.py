"""Hostile and faulty inputs (issue 26): each reader turns a damaged or malicious file into a read problem, within
bounded memory, and keeps what it can. The files are built here by the tests, never shipped as fixtures."""

from __future__ import annotations

import json
import struct

import pytest

from ingest.configs import MAX_DEPTH, MAX_NODES, DocumentTooLarge, parse_config_text, read_config
from ingest.tensorfiles import Unreadable, read_safetensors_header


def alias_bomb(levels: int = 10, width: int = 9) -> str:
    """YAML whose anchors each repeat the previous one `width` times: about 500 bytes, width**levels leaves."""
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested(depth: int, suffix: str) -> str:
    return "a: " + "[" * depth + "]" * depth if suffix == ".yaml" else "[" * depth + "]" * depth


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    """Issue 26 item 1: 478 bytes of YAML aliases expanded to 9**9 leaves in flatten / the store's JSON: 11 GB."""
    path = tmp_path / "config.yaml"
    path.write_text(alias_bomb())
    assert path.stat().st_size < 600
    [chunk] = read_config(path)
    assert [i.kind for i in chunk.issues] == ["too_large"] and not chunk.configs
    assert "config.yaml" in chunk.issues[0].detail


def test_aliases_within_the_limit_are_kept_as_written():
    doc = parse_config_text(alias_bomb(levels=3, width=3), ".yaml")
    assert doc["a2"] == [[["x"] * 3] * 3] * 3


@pytest.mark.parametrize("text", ["a: &a [*a]", "a: &a {b: *a}"])
def test_a_yaml_cycle_is_refused_not_walked_forever(text):
    with pytest.raises(DocumentTooLarge):
        parse_config_text(text, ".yaml")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("depth", [100_000, MAX_DEPTH + 1])
def test_deep_nesting_is_a_read_problem_not_a_recursion_error(tmp_path, suffix, depth):
    """Issue 26 item 6: 100k-deep nesting in config.json / config.yaml raised RecursionError."""
    path = tmp_path / f"config{suffix}"
    path.write_text(nested(depth, suffix))
    [chunk] = read_config(path)
    assert [i.kind for i in chunk.issues] == ["too_large"]


def test_the_node_limit_counts_values_once_per_use():
    width = 1000
    text = f"a: &a [{', '.join(['1'] * width)}]\nb: [{', '.join(['*a'] * (MAX_NODES // width))}]\n"
    with pytest.raises(DocumentTooLarge, match="more than"):
        parse_config_text(text, ".yaml")


def test_deep_trainer_state_keeps_nothing_and_says_why(tmp_path):
    from ingest.hf_trainer import read_trainer_state

    path = tmp_path / "trainer_state.json"
    path.write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    [chunk] = read_trainer_state(path)
    assert [i.kind for i in chunk.issues] == ["too_large"] and chunk.scalars is None


def test_deep_jsonl_line_is_skipped_and_the_rest_kept(tmp_path):
    from ingest.tabular import read_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n' + "[" * 100_000 + "]" * 100_000 + '\n{"step": 2, "loss": 1.0}\n')
    [chunk] = read_jsonl(path)
    assert chunk.scalars["value"].to_list() == [2.0, 1.0] and [i.position for i in chunk.issues] == [2]


def test_deep_wandb_summary_is_a_read_problem(tmp_path):
    from ingest.wandb_files import read_wandb_summary

    path = tmp_path / "wandb-summary.json"
    path.write_text('{"loss": ' + "[" * 100_000 + "]" * 100_000 + "}")
    chunks = list(read_wandb_summary(path))
    assert [i.kind for c in chunks for i in c.issues] == ["too_large"]


def test_safetensors_header_nested_deep_is_unreadable_not_a_crash(tmp_path):
    path = tmp_path / "model.safetensors"
    raw = ("[" * 100_000 + "]" * 100_000).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(Unreadable):
        read_safetensors_header(path)


def test_safetensors_metadata_that_is_a_list_is_ignored_with_an_issue(tmp_path):
    """Issue 26 item 6: a `__metadata__` list raised AttributeError."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"__metadata__": [1, 2], "w": {"dtype": "F32", "shape": [3],
                                                                        "data_offsets": [0, 12]}}, bytes(12)))
    metadata, refs, issues = read_safetensors_header(path)
    assert metadata == {} and list(refs) == ["w"] and [i.kind for i in issues] == ["garbled"]


@pytest.mark.parametrize("entry", [
    {"dtype": "F32", "shape": [2**40], "data_offsets": [0, 16]},  # a shape far larger than its bytes
    {"dtype": "F32", "shape": [4], "data_offsets": [-64, -48]},  # an offset that reads the header as weights
    {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]},
    {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]},
])
def test_inconsistent_safetensors_entries_are_not_read_as_ok(tmp_path, entry):
    """Issue 26 item 12: a 2**40-element shape over 16 bytes, or an offset reading the header, was accepted."""
    path = tmp_path / "model.safetensors"
    path.write_bytes(safetensors_bytes({"w": entry, "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}},
                                       bytes(24)))
    _, refs, issues = read_safetensors_header(path)
    assert list(refs) == ["b"] and [i.kind for i in issues] == ["garbled"] and "'w'" in issues[0].detail

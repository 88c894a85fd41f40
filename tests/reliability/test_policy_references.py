"""Policy folders from someone else: references outside the folder (``../``, absolute paths, symbolic links, a LoRA
base, a tokenizer hub id) are refused before anything is read unless allowed, and oversized or deeply nested
JSON/YAML is refused with a message. A real pi05_tiny policy folder, tampered with in copies."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from embodied_core import load_policy
from embodied_core.checkpoint.layout import read_meta
from embodied_core.config.layers import read_yaml
from embodied_core.documents import MAX_DOCUMENT_BYTES
from embodied_core.errors import CheckpointError, ConfigError, ExternalReferenceError
from embodied_core.policy import export_policy, read_policy_folder
from tests.support import REPO_ROOT, run_embodied


@pytest.fixture
def foreign(checkpoint, tmp_path) -> Path:
    """A copy of the policy folder on its own (as a download of someone's checkpoint would be)."""
    return Path(shutil.copytree(checkpoint, tmp_path / "downloaded" / "policy",
                                ignore=shutil.ignore_patterns("training_state")))


def _edit_doc(folder: Path, **entries) -> None:
    doc = json.loads((folder / "policy.json").read_text())
    doc.update(entries)
    (folder / "policy.json").write_text(json.dumps(doc))


def _refusal(folder: Path, *, expect: str) -> str:
    with pytest.raises(ExternalReferenceError) as info:
        read_policy_folder(folder)
    text = str(info.value)
    assert expect in text and "--allow-external-references" in text, text
    return text


def test_the_folder_and_its_run_load_without_the_flag(checkpoint, foreign):
    assert load_policy(checkpoint).metadata.action_horizon == 10  # a checkpoint of a run: boundary = the run
    assert read_policy_folder(foreign).path == foreign.resolve()


def test_a_stats_file_outside_the_folder_is_refused_then_read_when_allowed(foreign):
    shutil.move(foreign / "stats.safetensors", foreign.parent / "stats.safetensors")
    _edit_doc(foreign, stats_file="../stats.safetensors")
    text = _refusal(foreign, expect="policy.json stats_file = '../stats.safetensors'")
    assert f"would read {foreign.parent.resolve() / 'stats.safetensors'} (outside {foreign.resolve()})" in text
    folder = read_policy_folder(foreign, allow_external_references=True)
    assert "action" in folder.stats  # read from the path the message named


def test_an_absolute_stats_file_is_refused(foreign):
    _edit_doc(foreign, stats_file="/etc/hostname")
    _refusal(foreign, expect="policy.json stats_file = '/etc/hostname' -> would read /etc/hostname")


def test_a_symbolic_link_leading_out_is_refused_one_staying_inside_is_not(foreign):
    outside = foreign.parent / "elsewhere.safetensors"
    shutil.move(foreign / "stats.safetensors", outside)
    (foreign / "stats.safetensors").symlink_to(outside)
    _refusal(foreign, expect=f"symlink stats.safetensors = '{outside}'")
    (foreign / "stats.safetensors").unlink()
    shutil.move(outside, foreign / "real_stats.safetensors")
    (foreign / "stats.safetensors").symlink_to("real_stats.safetensors")
    assert "action" in read_policy_folder(foreign).stats


def test_tokenizer_references_outside_and_hub_ids_are_refused(foreign, tmp_path):
    _edit_doc(foreign, tokenizer={"source": str(tmp_path / "big_tokenizer"), "files": None})
    _refusal(foreign, expect=f"policy.json tokenizer.source = '{tmp_path / 'big_tokenizer'}'")
    _edit_doc(foreign, tokenizer={"source": "google/paligemma-3b-pt-224", "files": None})
    _refusal(foreign, expect="'google/paligemma-3b-pt-224': a hub id (nothing in embodied downloads it")
    _edit_doc(foreign, tokenizer={"source": None, "files": "../tokenizer"})
    _refusal(foreign, expect="policy.json tokenizer.files = '../tokenizer'")


def test_a_lora_base_outside_the_folder_is_refused_before_it_is_read(foreign, tmp_path):
    base = tmp_path / "someone" / "base.safetensors"
    (foreign / "lora_base.json").write_text(json.dumps({"base": {"kind": "pretrained", "path": str(base),
                                                                 "files": {}}, "training": {}}))
    _refusal(foreign, expect=f"lora_base.json base.path = '{base}'")


def test_export_refuses_to_copy_an_outside_file_unless_allowed(foreign, tmp_path):
    _edit_doc(foreign, stats_file="../stats.safetensors")
    shutil.move(foreign / "stats.safetensors", foreign.parent / "stats.safetensors")
    done = run_embodied("checkpoint", "export", str(foreign), str(tmp_path / "out"))
    assert done.returncode == 2 and "policy.json stats_file = '../stats.safetensors'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
    export_policy(foreign, tmp_path / "out", allow_external_references=True)
    copied = tmp_path / "out" / "stats.safetensors"
    assert copied.is_file() and not copied.is_symlink()


def test_serve_names_the_flag_and_what_it_would_read(foreign):
    _edit_doc(foreign, stats_file="/etc/hostname")
    done = run_embodied("serve", str(foreign), "--port", "0")
    assert done.returncode == 2 and "/etc/hostname" in done.stderr and "--allow-external-references" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_oversized_or_deeply_nested_policy_json_is_refused(foreign):
    path = foreign / "policy.json"
    path.write_text('{"pad": "' + "x" * (MAX_DOCUMENT_BYTES + 1) + '"}')
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: {MAX_DOCUMENT_BYTES + 12:,} bytes; documents over")):
        read_policy_folder(foreign)
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(CheckpointError, match="nests maps/lists more than 64 levels deep"):
        read_policy_folder(foreign)
    meta = foreign / "meta.json"
    meta.write_text('{"a":' * 100 + "1" + "}" * 100)
    with pytest.raises(CheckpointError, match=re.escape(f"{meta}: nests maps/lists more than 64 levels deep")):
        read_meta(foreign)


_ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


def test_alias_bombs_deep_and_oversized_yaml_configs_are_refused(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("training:\n  train_iters: 1\n" + _ALIAS_BOMB)
    with pytest.raises(ConfigError, match="unfolds into more than 1,000,000 values"):
        read_yaml(bomb)
    deep = tmp_path / "deep.yaml"
    deep.write_text("model: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nests maps/lists more than 64 levels deep"):
        read_yaml(deep)
    large = tmp_path / "large.yaml"
    large.write_text("model:\n  pad: " + "x" * (MAX_DOCUMENT_BYTES + 1) + "\n")
    with pytest.raises(ConfigError, match="documents over"):
        read_yaml(large)
    done = run_embodied("train", "--model-name", "pi05_tiny", "--config-file", str(bomb))
    assert done.returncode == 2 and "unfolds into more than" in done.stderr and "Traceback" not in done.stderr


def test_no_loader_of_ours_sets_trust_remote_code():
    hits = [f"{path.relative_to(REPO_ROOT)}:{n}" for path in (REPO_ROOT / "packages").rglob("*.py")
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if re.search(r"trust_remote_code\s*=\s*(True|[a-z_]+)", line)]
    assert not hits, hits

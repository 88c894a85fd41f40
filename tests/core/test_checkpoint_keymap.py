"""The key-map contract in core: prefix strips, regex renames with tensor transforms, keep/tied/ignored globs,
allowed differences, one report type."""

from __future__ import annotations

import pytest
import torch

from embodied_core.checkpoint.keymap import Allow, KeyMap, LoadReport, Rename, compare_state, load_state
from embodied_core.errors import CheckpointError


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(5, 4)
        self.proj = torch.nn.Linear(12, 4)
        self.head = torch.nn.Linear(4, 2)


KEYMAP = KeyMap(
    strip_prefixes=("model.",),
    renames=(Rename(r"enc\.patch\.(?P<rest>.+)", "proj.{rest}",
                    transform=lambda t: t.flatten(1) if t.ndim == 3 else t),
             Rename(r"out_(?P<p>weight|bias)", "head.{p}")),
    keep=("embed.*",),
    tied=(Rename(r"lm_head\.weight", "embed.weight"),),
    ignored=("aux.*",),
)


def _source(net: Net) -> dict[str, torch.Tensor]:
    state = net.state_dict()
    return {"model.lm_head.weight": state["embed.weight"].clone(),
            "model.enc.patch.weight": state["proj.weight"].reshape(4, 3, 4).clone(),
            "model.enc.patch.bias": state["proj.bias"].clone(),
            "out_weight": state["head.weight"].clone(), "out_bias": state["head.bias"].clone(),
            "aux.loss_scale": torch.ones(1)}


def test_every_rule_maps_and_the_module_gets_the_values() -> None:
    source_net, target = Net(), Net()
    report = load_state(target, _source(source_net), KEYMAP, source="unit")
    assert isinstance(report, LoadReport) and report.ok
    assert report.tied == ["model.lm_head.weight -> embed.weight"] and report.ignored == ["aux.loss_scale"]
    for key, value in source_net.state_dict().items():
        assert torch.equal(target.state_dict()[key], value), key


def test_a_tied_source_is_ignored_when_the_target_is_present() -> None:
    source = {**_source(Net()), "embed.weight": torch.zeros(5, 4)}
    report = load_state(Net(), source, KEYMAP, source="unit")
    assert report.tied == [] and "model.lm_head.weight" in report.ignored


def test_all_differences_reported_together_and_allow_globs_cover_them() -> None:
    source = _source(Net())
    del source["out_bias"]
    source["model.enc.patch.bias"] = torch.zeros(7)
    source["unknown.weight"] = torch.zeros(1)
    with pytest.raises(CheckpointError) as info:
        load_state(Net(), source, KEYMAP, source="ckpt.safetensors", hint="check the sizes")
    message = str(info.value)
    assert message.startswith("ckpt.safetensors does not fit Net (3 problem(s)")
    assert "missing: head.bias" in message and "unexpected: unknown.weight" in message
    assert "shape mismatch: proj.bias (model (4,), checkpoint model.enc.patch.bias (7,))" in message
    assert message.endswith("check the sizes")
    report = load_state(Net(), source, KEYMAP, source="ckpt",
                        allow=Allow(missing=("head.*",), unexpected=("unknown.*",), mismatched=("proj.b*",)))
    assert not report.ok and report.missing == ["head.bias"]
    assert "1 shape-mismatched keys: proj.bias: checkpoint (7,) vs model (4,)" in report.describe()


def test_two_keys_onto_one_target_is_an_error_and_compare_copies_nothing() -> None:
    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    source = _source(Net())
    assert compare_state(net, source, KEYMAP).ok
    assert all(torch.equal(net.state_dict()[k], v) for k, v in before.items())
    with pytest.raises(CheckpointError, match=r"maps two keys onto head\.weight"):
        load_state(Net(), {**source, "model.out_weight": source["out_weight"]}, KEYMAP, source="x")

"""``embodied checkpoint import-lerobot-smolvla SRC DST``: a lerobot SmolVLA checkpoint -> our policy folder.

A checkpoint written by lerobot's ``lerobot-train --policy.type=smolvla`` (its ``pretrained_model/`` folder:
``config.json``, ``model.safetensors``, the preprocessor's normalizer statistics) becomes a folder that
``load_policy``, ``embodied eval`` and ``embodied serve`` read like one of our own checkpoints:

- the model/data config: ``--model-name``'s preset with every size, layout and inference setting lerobot's config
  records (``chunk_size``, ``max_state_dim``/``max_action_dim``, ``num_vlm_layers``, expert width/layers,
  attention mode, ``num_steps``, ``tokenizer_max_length``, ``resize_imgs_with_padding``, ``prefix_length``, the
  freeze flags; values this port does not implement are refused, see ``reference.py``) and the
  VLM sizes of the folder ``vlm_model_name`` names (its ``config.json``); cameras, state and action from the
  config's input/output features, normalization from its ``normalization_mapping``;
- the weights through the declared lerobot key map, loaded strictly into the model built from that config;
- the statistics lerobot normalized with (its normalizer step's state file), as float64;
- the tokenizer files of the VLM folder, copied into ``tokenizer/`` (the task then tokenizes as in lerobot).

Only local files are read (a hub id as ``vlm_model_name`` is refused: pass ``--vlm-folder``). Reading executes
nothing: JSON and safetensors.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from embodied_core.errors import CheckpointError, UsageError
from embodied_models.smolvla.reference import policy_problems, vlm_problems

__all__ = ["ImportResult", "import_lerobot_smolvla", "lerobot_configs", "main", "read_lerobot_stats"]

PROG = "embodied checkpoint import-lerobot-smolvla"
PRETRAINED_DIR = "pretrained_model"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "added_tokens.json", "chat_template.jinja", "chat_template.json")
_NORMALIZATION = {"MEAN_STD": "mean_std", "MIN_MAX": "min_max", "QUANTILES": "quantile", "IDENTITY": "none"}


@attrs.frozen
class ImportResult:
    """What :func:`import_lerobot_smolvla` wrote."""

    source: Path
    destination: Path
    step: int | None
    num_tensors: int
    camera_keys: tuple[str, ...]


def pretrained_folder(src: Path) -> Path:
    """The ``pretrained_model`` folder ``src`` designates: itself, its ``pretrained_model/``, or a lerobot run's
    ``checkpoints/last/pretrained_model``."""
    for candidate in (src, src / PRETRAINED_DIR, src / "checkpoints" / "last" / PRETRAINED_DIR):
        if (candidate / "config.json").is_file() and (candidate / "model.safetensors").is_file():
            return candidate
    raise UsageError(f"{src}: not a lerobot checkpoint (no config.json + model.safetensors in it, in "
                     f"{PRETRAINED_DIR}/ or in checkpoints/last/{PRETRAINED_DIR}/)")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return doc


def _vlm_folder(policy_cfg: dict[str, Any], override: Path | None, source: Path) -> Path:
    if override is not None:
        folder = override
    else:
        name = policy_cfg.get("vlm_model_name")
        if not isinstance(name, str) or not Path(name).is_dir():
            raise UsageError(f"{source}: vlm_model_name {name!r} is not a local folder (hub ids are not fetched); "
                             "pass --vlm-folder DIR with that VLM's config.json and tokenizer files")
        folder = Path(name)
    if not (folder / "config.json").is_file():
        raise UsageError(f"--vlm-folder {folder}: no config.json (a SmolVLM config folder is expected)")
    return folder


def lerobot_configs(policy_cfg: dict[str, Any], vlm_cfg: dict[str, Any], *, model_defaults: dict[str, Any],
                    data_defaults: dict[str, Any], source: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Our ``model:`` / ``data:`` sections (plain dicts) for lerobot's ``SmolVLAConfig`` and its VLM's config.

    ``model_defaults`` / ``data_defaults`` are the preset's sections; every value lerobot's config decides
    replaces the preset's. UsageError naming the file for what our model cannot represent."""
    problems = []
    if policy_cfg.get("type") != "smolvla":
        raise UsageError(f"{source}: policy type {policy_cfg.get('type')!r}, not 'smolvla'")
    vision, text = vlm_cfg.get("vision_config") or {}, vlm_cfg.get("text_config") or {}
    if not vision or not text:
        raise UsageError(f"{source}: the VLM config has no vision_config/text_config (not a SmolVLM config)")
    features = policy_cfg.get("input_features") or {}
    cameras = [key for key, f in features.items() if f.get("type") == "VISUAL"]
    states = [key for key, f in features.items() if f.get("type") == "STATE"]
    actions = [key for key, f in (policy_cfg.get("output_features") or {}).items() if f.get("type") == "ACTION"]
    if len(states) != 1 or len(actions) != 1:
        problems.append(f"one STATE input and one ACTION output are supported (found {states} and {actions})")
    mapping = policy_cfg.get("normalization_mapping") or {}
    state_norm, action_norm = mapping.get("STATE", "MEAN_STD"), mapping.get("ACTION", "MEAN_STD")
    if state_norm != action_norm or state_norm not in _NORMALIZATION:
        problems.append(f"normalization_mapping STATE {state_norm} / ACTION {action_norm}: one mode of "
                        f"{sorted(_NORMALIZATION)} for both is supported")
    if mapping.get("VISUAL", "IDENTITY") != "IDENTITY":
        problems.append(f"normalization_mapping VISUAL {mapping.get('VISUAL')}: only IDENTITY (SmolVLA's) is supported")
    problems += policy_problems(policy_cfg)
    resize = policy_cfg.get("resize_imgs_with_padding")
    image = int(resize[0]) if resize else int(vision["image_size"])
    if resize and int(resize[0]) != int(resize[1]):
        problems.append(f"resize_imgs_with_padding {resize}: our SmolVLA needs a square size")
    problems += vlm_problems(vlm_cfg, image_size=image)
    if problems:
        raise UsageError(f"{source}: " + "; ".join(problems))
    model = {
        **model_defaults,
        "vlm_width": text["hidden_size"], "vlm_mlp_dim": text["intermediate_size"], "vocab_size": text["vocab_size"],
        "num_vlm_layers": int(policy_cfg.get("num_vlm_layers", text["num_hidden_layers"])),
        "num_heads": text["num_attention_heads"], "num_kv_heads": text["num_key_value_heads"],
        "head_dim": text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"],
        "rms_norm_eps": text.get("rms_norm_eps", 1e-5),
        "pad_token_id": text.get("pad_token_id") if text.get("pad_token_id") is not None else 0,
        "expert_width_multiplier": policy_cfg["expert_width_multiplier"],
        "num_expert_layers": policy_cfg.get("num_expert_layers", -1),
        "attention_mode": policy_cfg["attention_mode"],
        "self_attn_every_n_layers": policy_cfg["self_attn_every_n_layers"],
        "vision_width": vision["hidden_size"], "vision_depth": vision["num_hidden_layers"],
        "vision_mlp_dim": vision["intermediate_size"], "vision_num_heads": vision["num_attention_heads"],
        "vision_patch_size": vision["patch_size"], "layer_norm_eps": vision.get("layer_norm_eps", 1e-6),
        "scale_factor": vlm_cfg.get("scale_factor", 2),
        "add_image_special_tokens": bool(policy_cfg.get("add_image_special_tokens", False)),
        "prefix_length": int(policy_cfg.get("prefix_length", -1)),
        "max_state_dim": policy_cfg["max_state_dim"], "max_action_dim": policy_cfg["max_action_dim"],
        "tokenizer_max_length": policy_cfg["tokenizer_max_length"],
        "num_inference_steps": policy_cfg["num_steps"],
        "min_period": policy_cfg["min_period"], "max_period": policy_cfg["max_period"],
        "freeze_vision_encoder": policy_cfg["freeze_vision_encoder"],
        "train_expert_only": policy_cfg["train_expert_only"], "train_state_proj": policy_cfg["train_state_proj"],
        "keep_lm_head": True,
    }
    data = {
        **data_defaults,
        "camera_keys": cameras, "empty_cameras": int(policy_cfg.get("empty_cameras", 0)),
        "image_size": [image, image],
        "state_key": states[0], "state_dim": int(features[states[0]]["shape"][0]),
        "action_key": actions[0], "action_dim": int(policy_cfg["output_features"][actions[0]]["shape"][0]),
        "action_horizon": int(policy_cfg["chunk_size"]),
        "normalization": _NORMALIZATION[state_norm],
    }
    return model, data


def read_lerobot_stats(folder: Path, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The statistics of ``keys`` from the normalizer step of ``policy_preprocessor.json`` (float64 arrays)."""
    import numpy as np
    from safetensors.numpy import load_file

    pipeline = _read_json(folder / "policy_preprocessor.json")
    files = [step.get("state_file") for step in pipeline.get("steps", [])
             if step.get("registry_name") == "normalizer_processor" and step.get("state_file")]
    if len(files) != 1:
        raise CheckpointError(f"{folder / 'policy_preprocessor.json'}: expected one normalizer step with a state "
                              f"file, found {len(files)}")
    flat = load_file(str(folder / files[0]))
    stats: dict[str, dict[str, Any]] = {}
    for name, array in flat.items():
        key, _, stat = name.rpartition(".")
        if key in keys:
            stats.setdefault(key, {})[stat] = np.asarray(array, dtype=np.float64)
    missing = [key for key in keys if key not in stats]
    if missing:
        raise CheckpointError(f"{folder / files[0]}: no statistics for {missing}")
    return stats


def _dataset_info(train_cfg: dict[str, Any]) -> dict[str, Any] | None:
    root = (train_cfg.get("dataset") or {}).get("root")
    info = Path(root) / "meta" / "info.json" if root else None
    return _read_json(info) if info is not None and info.is_file() else None


def _step(folder: Path) -> int | None:
    path = folder.parent / "training_state" / "training_step.json"
    if path.is_file():
        step = _read_json(path).get("step")
        return step if isinstance(step, int) else None
    return None


def import_lerobot_smolvla(src: str | Path, dst: str | Path, *, model_name: str = "smolvla_tiny",
                           vlm_folder: str | Path | None = None) -> ImportResult:
    """Writes our policy folder for the lerobot SmolVLA checkpoint ``src`` to ``dst`` (see the module docstring).

    Raises:
        UsageError: ``dst`` exists and is not empty, ``src`` is no lerobot SmolVLA checkpoint, or its config holds
            something our SmolVLA cannot represent.
        CheckpointError: unreadable files, or weights that do not load strictly.
    """
    from safetensors.torch import load_file

    from embodied_core.config.converter import structure, unstructure
    from embodied_core.config.layers import read_package_yaml
    from embodied_core.config.provenance import embodied_versions
    from embodied_core.policy.export import check_destination, write_policy_folder
    from embodied_core.policy.folder import POLICY_FORMAT, STATS_FILE, TOKENIZER_DIR, write_stats
    from embodied_core.policy.spec import plugin_record
    from embodied_core.registry import get_spec
    from embodied_core.registry.groups import MODELS
    from embodied_models.smolvla.checkpoint import load_smolvla_checkpoint
    from embodied_models.smolvla.modeling import build_model

    dst = Path(dst)
    check_destination(dst)
    folder = pretrained_folder(Path(src)).resolve()
    spec = get_spec(MODELS, model_name)
    if spec.factory != "embodied_models.smolvla.modeling:build_model":
        raise UsageError(f"--model-name {model_name}: not a SmolVLA model plugin (smolvla, smolvla_tiny)")
    policy_cfg = _read_json(folder / "config.json")
    vlm = _vlm_folder(policy_cfg, Path(vlm_folder) if vlm_folder is not None else None, folder / "config.json")
    defaults = read_package_yaml(spec.default_yaml) if spec.default_yaml else {}
    model_dict, data_dict = lerobot_configs(policy_cfg, _read_json(vlm / "config.json"),
                                            model_defaults=defaults.get("model", {}),
                                            data_defaults=defaults.get("data", {}), source=folder / "config.json")
    tokenizer_files = [vlm / name for name in TOKENIZER_FILES if (vlm / name).is_file()]
    if not tokenizer_files:
        raise UsageError(f"{vlm}: no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}); lerobot tokenized the task "
                         "with this folder's tokenizer")
    model_dict["tokenizer"] = "smolvlm"
    source = str(folder / "config.json")
    model_config = structure(model_dict, spec.model_config, path="model", source=source)
    data_config = structure(data_dict, spec.data_config, path="data", source=source)
    problems = [*model_config.validate(), *data_config.validate()]
    if problems:
        raise UsageError(f"{source}: " + "; ".join(problems))

    model = build_model(model_config, data_config)
    load_smolvla_checkpoint(model, load_file(str(folder / "model.safetensors")))
    weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    stats = read_lerobot_stats(folder, [data_config.state_key, data_config.action_key])
    train_cfg = _read_json(folder / "train_config.json") if (folder / "train_config.json").is_file() else {}
    info = _dataset_info(train_cfg)
    features_doc = {key: {"dtype": f.get("dtype"), "shape": list(f.get("shape", [])), "names": f.get("names")}
                    for key, f in (info or {}).get("features", {}).items()}
    inputs = policy_cfg["input_features"]
    interface = {
        "camera_keys": list(data_config.camera_keys),
        "image_shapes": {key: [*inputs[key]["shape"][1:], inputs[key]["shape"][0]] for key in data_config.camera_keys},
        "image_size": list(data_config.image_size), "image_history": 1,
        "state_key": data_config.state_key, "state_dim": data_config.state_dim,
        "state_names": (features_doc.get(data_config.state_key) or {}).get("names"), "state_history": 1,
        "action_key": data_config.action_key, "action_dim": data_config.action_dim,
        "action_names": (features_doc.get(data_config.action_key) or {}).get("names"),
        "action_horizon": data_config.action_horizon,
        "fps": float(info["fps"]) if info and info.get("fps") else None,
        "needs_task": spec.needs_task,
    }
    step = _step(folder)
    doc = {
        "policy_format": POLICY_FORMAT, "model_name": model_name, "plugin": plugin_record(model_name),
        "model_config": unstructure(model_config), "data_config": unstructure(data_config),
        "interface": interface, "stats_file": STATS_FILE, "features": features_doc,
        "dataset": {"format": "lerobot_datasets", "path": (train_cfg.get("dataset") or {}).get("root")},
        "versions": embodied_versions(), "tokenizer": {"source": str(vlm), "files": TOKENIZER_DIR},
    }
    record = {"imported_from": {"format": "lerobot", "path": str(folder), "policy_type": "smolvla",
                                "n_action_steps": policy_cfg.get("n_action_steps")}}
    with tempfile.TemporaryDirectory(prefix=".import-lerobot-") as staging:
        staged = Path(staging)
        write_stats(stats, staged / STATS_FILE)
        (staged / TOKENIZER_DIR).mkdir()
        for path in tokenizer_files:
            shutil.copy2(path, staged / TOKENIZER_DIR / path.name)
        write_policy_folder(staged, doc, weights, dst, step=step, record=record)
    return ImportResult(source=folder, destination=dst, step=step, num_tensors=len(weights),
                        camera_keys=tuple(data_config.camera_keys))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    parser.add_argument("src", type=Path, help="lerobot checkpoint: a pretrained_model/ folder, the checkpoint "
                        "folder holding it, or a lerobot-train --output_dir (its checkpoints/last)")
    parser.add_argument("dst", type=Path, help="the policy folder to write (must not exist, or be empty)")
    parser.add_argument("--model-name", default="smolvla_tiny", help="our SmolVLA plugin whose preset fills what "
                        "lerobot's config does not decide (smolvla or smolvla_tiny; default smolvla_tiny)")
    parser.add_argument("--vlm-folder", type=Path, default=None, help="local folder of the VLM config and tokenizer "
                        "(default: the checkpoint's vlm_model_name, which must then be a local folder)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    from embodied_core.cli import run_guarded

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))

    def run() -> int:
        result = import_lerobot_smolvla(args.src, args.dst, model_name=args.model_name, vlm_folder=args.vlm_folder)
        step = f"step {result.step}" if result.step is not None else "unknown step"
        print(f"imported {result.source} ({step}) to {result.destination}: {result.num_tensors} tensors, cameras "
              f"{', '.join(result.camera_keys)}; load it with embodied eval / embodied serve {result.destination}")
        return 0

    return run_guarded(PROG, run)


if __name__ == "__main__":
    sys.exit(main())

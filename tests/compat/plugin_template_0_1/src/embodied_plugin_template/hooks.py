"""Hook implementations (entry point ``embodied.hooks: run_events``): ``hook_events.jsonl`` in the output dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from embodied_core import hookimpl

_output_dir: Path | None = None


def _write(event: dict[str, Any]) -> None:
    if _output_dir is not None and _output_dir.is_dir():
        with (_output_dir / "hook_events.jsonl").open("a") as f:
            f.write(json.dumps(event) + "\n")


@hookimpl
def on_train_start(config: Any, model: Any, output_dir: str, start_step: int) -> None:
    global _output_dir
    _output_dir = Path(output_dir)
    params = sum(p.numel() for p in model.parameters())
    _write({"event": "train_start", "start_step": start_step, "parameters": params})


@hookimpl
def on_save_checkpoint(step: int, path: str) -> None:
    _write({"event": "save_checkpoint", "step": step, "path": path})


@hookimpl
def on_train_end(step: int, output_dir: str, summary: dict[str, Any]) -> None:
    _write({"event": "train_end", "step": step, "final_loss": summary.get("final_loss")})

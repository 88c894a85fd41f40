"""``benchmarks/vs_lerobot.py`` at the tiny sizes: for every model lerobot 0.6.1 also ships, lerobot's module (in
``.venv-lerobot``) and ours, with lerobot's weights through our strict loader and the same inputs and draws, give
the same training losses over two steps (fwd + bwd + AdamW, so the second loss checks the update too), and the
same sampled action chunk (the action sampling ``benchmarks/inference_latency.py`` times).

lerobot's side of all six models runs in one side-venv process (it writes the weights); ours runs in this
process with the benchmark's own runner. lingbot_va is the exception in two ways, both lerobot's: its training runs
flex attention in bfloat16 (so the losses agree to bfloat16 rounding) and flex has no backward on CPU (so the
step is the forward). One test runs the script end to end (fresh processes, ``--json``).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from benchmarks.lerobot_cases import MODELS, load_case
from benchmarks.lerobot_cases.runner import run_side, sized
from tests.support import REPO_ROOT, clean_env

LEROBOT_PYTHON = REPO_ROOT / ".venv-lerobot" / "bin" / "python"
SCRIPT = REPO_ROOT / "benchmarks" / "vs_lerobot.py"
STEPS = 2
REL_TOL = {"lingbot_va": 5e-3}  # bfloat16 on both sides (lerobot's training dtype); every other model: 1e-5


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lerobot_records(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """lerobot's side of every model, tiny, in one side-venv process: its losses per model (and the weights)."""
    assert LEROBOT_PYTHON.is_file(), f"{LEROBOT_PYTHON} missing: run scripts/setup.sh (it creates .venv-lerobot)"
    work = tmp_path_factory.mktemp("vs_lerobot")
    proc = subprocess.run([str(LEROBOT_PYTHON), str(SCRIPT), "--role", "lerobot", "--model", *MODELS, "--size",
                           "tiny", "--work", str(work), "--steps", str(STEPS), "--warmup", "0", "--threads", "1",
                           "--save-actions"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                          env=clean_env(HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return work, {r["model"]: r for r in records}


@pytest.mark.parametrize("model", MODELS)
def test_our_losses_equal_lerobots(lerobot_records: tuple[Path, dict[str, dict]], model: str) -> None:
    work, records = lerobot_records
    theirs = records[model]
    ours = run_side(model, "ours", size=sized(load_case(model), "tiny", None), work=work / model, steps=STEPS,
                    warmup=0, save_actions=True)
    assert ours["mode"] == theirs["mode"] == ("forward" if model == "lingbot_va" else "train")
    assert len(ours["losses"]) == len(theirs["losses"]) == STEPS
    assert all(math.isfinite(v) and v > 0 for v in theirs["losses"])
    if ours["mode"] == "train":
        assert theirs["losses"][1] != theirs["losses"][0]  # the update changed the weights: step 2 checks it
        # the same parameters trained (lerobot's freezing defaults; weights neither side uses get no gradient)
        assert ours["trained_params"] == theirs["trained_params"] > 0
    rel = max(abs(a - b) / abs(b) for a, b in zip(ours["losses"], theirs["losses"], strict=True))
    print(f"{model}: losses {theirs['losses']} (lerobot) vs {ours['losses']} (ours), rel diff {rel:.1e}")
    assert rel <= REL_TOL.get(model, 1e-5), (model, ours["losses"], theirs["losses"])
    if model != "lingbot_va":  # and the same action chunk from the same observation and noise (before training)
        actions = {role: load_file(work / model / f"{role}.actions.safetensors")["actions"] for role in ("ours",
                                                                                                         "lerobot")}
        assert actions["ours"].shape == actions["lerobot"].shape and actions["lerobot"].abs().max() > 0.1
        torch.testing.assert_close(actions["ours"], actions["lerobot"], atol=2e-5, rtol=1e-5)


def test_the_script_prints_the_comparison_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One round of ours and lerobot's eager step, each in a fresh process (the driver runs here); the last line
    is the summary object, also written to the --json path."""
    from benchmarks.vs_lerobot import main

    for key, value in clean_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1").items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "groot.json"
    main(["--model", "groot_n1_7", "--size", "tiny", "--rounds", "1", "--steps", "1", "--warmup", "0",
          "--no-compile", "--json", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary == json.loads(out.read_text())
    assert {"model", "size", "eager_ratio", "compiled_ratio", "loss_rel_diff", "peak_mem_ratio"} <= summary.keys()
    assert (summary["model"], summary["size"], summary["compiled_ratio"]) == ("groot_n1_7", "tiny", None)
    assert summary["eager_ratio"] > 0 and summary["loss_rel_diff"] <= 1e-5
    assert any(line.lstrip().startswith("ours eager") for line in lines)


def test_bad_arguments_are_usage_errors() -> None:
    from benchmarks.vs_lerobot import parse_args

    with pytest.raises(SystemExit) as info:
        parse_args(["--model", "pi05", "xvla"])
    assert info.value.code == 2
    with pytest.raises(SystemExit, match="no size 'full'"):
        sized(load_case("xvla"), "full", None)

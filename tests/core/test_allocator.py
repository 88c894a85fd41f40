"""The loader's malloc tuning (``embodied_core.data.allocator``): batch-sized blocks are reused, not mapped afresh."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import Dataset

from embodied_core.data import allocator
from embodied_core.data.loader import ResumableLoader
from embodied_core.data.samplers import cyclic_sampler
from embodied_core.model_api import collate_samples

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

# Page faults of allocating, filling and freeing a 64 MB tensor 20 times, after one warm-up round.
_FAULTS = textwrap.dedent("""
    import resource, sys
    import torch
    from embodied_core.data.allocator import keep_batch_memory
    print(keep_batch_memory() if sys.argv[1] == "tuned" else "untouched")
    def once():
        t = torch.empty(64 * 2**20, dtype=torch.uint8)
        t.fill_(1)
        del t
    once()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        once()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                                                              "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")}
    out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True,
                         env={**clean, **env}, timeout=60).stdout.split()
    return out[0], int(out[1])


@glibc_only
def test_tuned_process_reuses_a_freed_batch_block() -> None:
    applied, tuned = _faults("tuned")
    untouched, plain = _faults("plain")
    assert applied == "True" and untouched == "untouched"
    pages = 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    assert plain > 10 * pages  # glibc maps each 64 MB block afresh: every round faults its pages in again
    assert tuned < plain / 2  # reused from the heap: most rounds fault nothing in


@glibc_only
def test_user_setting_wins() -> None:
    applied, faults = _faults("tuned", MALLOC_MMAP_THRESHOLD_="131072")
    assert applied == "False"
    assert faults > 10 * 64 * 2**20 // os.sysconf("SC_PAGE_SIZE")


def test_user_tuned_malloc_reads_the_environment() -> None:
    assert not allocator.user_tuned_malloc({"PATH": "/bin"})
    assert allocator.user_tuned_malloc({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert allocator.user_tuned_malloc({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=4096"})
    assert not allocator.user_tuned_malloc({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"})


class _AppliedHere(Dataset):
    """Each sample says whether the process that read it has the tuning applied."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"applied": torch.tensor(allocator._applied_in_pid == os.getpid())}


@glibc_only
@pytest.mark.parametrize("workers", [0, 1])
@pytest.mark.parametrize("keep", [True, False])
def test_loader_applies_it_where_data_is_read(workers: int, keep: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(allocator, "_applied_in_pid", None)
    loader = ResumableLoader(_AppliedHere(), batch_size=2, share_fn=cyclic_sampler(0, 1), seed=0,
                             sample_transform=None, collate_fn=collate_samples, num_workers=workers,
                             multiprocessing_context="fork" if workers else None, keep_batch_memory=keep)
    try:
        batch = next(iter(loader))
    finally:
        loader.close()
    assert batch["applied"].tolist() == [keep, keep]

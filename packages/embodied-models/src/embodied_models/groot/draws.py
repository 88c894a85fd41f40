"""The GR00T models' training draws (noise, flow time, state dropout) from a generator the trainer seeds and
checkpoints.

The model owns one CPU ``torch.Generator``. Each training forward takes one 62-bit step key from it, and every
sample's draws come from a generator seeded with ``mix(step key, sample key)``, where the sample key is the
sample's dataset index. The draws of a sample therefore depend only on ``--seed``, the number of forwards so far
and which sample it is, not on the rank, the world size or the batch it landed in: two processes with half the
batch each draw exactly what one process with the whole batch draws. Batches without dataset indices key on
``(rank, position)`` instead. Nothing here touches torch's global RNG.

Flow time: ``t = (1 - Beta(alpha, beta)) * s`` (GR00T's convention, t = 1 is data); Beta comes from two Gamma
draws, as torch.distributions.Beta samples it.
"""

from __future__ import annotations

import attrs
import torch

__all__ = ["DrawStream", "FlowDraws", "mix_seed"]

_MASK64 = (1 << 64) - 1


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (splitmix64 finalizer over each part)."""
    state = 0x9E3779B97F4A7C15
    for part in parts:
        state = (state ^ (int(part) & _MASK64)) * 0xBF58476D1CE4E5B9 & _MASK64
        state ^= state >> 31
        state = state * 0x94D049BB133111EB & _MASK64
        state ^= state >> 29
    return state & ((1 << 63) - 1)


@attrs.frozen
class FlowDraws:
    """One training forward's draws (CPU tensors): noise [B, H, A], t [B], drop_state bool [B]."""

    noise: torch.Tensor
    t: torch.Tensor
    drop_state: torch.Tensor

    def to(self, device: torch.device) -> FlowDraws:
        """The draws on ``device`` (non-blocking)."""
        return FlowDraws(*(x.to(device, non_blocking=True) for x in (self.noise, self.t, self.drop_state)))


class DrawStream:
    """The model's generator and the per-sample keyed draws made from it."""

    def __init__(self) -> None:
        self.generator = torch.Generator()
        self.generator.manual_seed(0)
        self.rank = 0

    def seed(self, seed: int, *, rank: int = 0) -> None:
        """Seeds the stream (every rank with the same ``seed``; ``rank`` keys only batches without indices)."""
        self.generator.manual_seed(seed)
        self.rank = rank

    def state(self) -> torch.Tensor:
        """The generator state (uint8 tensor, checkpoint-safe)."""
        return self.generator.get_state()

    def set_state(self, state: torch.Tensor) -> None:
        """Restores :meth:`state`."""
        self.generator.set_state(state)

    def draw(self, sample_index: torch.Tensor | None, batch_size: int, shape: tuple[int, int], *, alpha: float,
             beta: float, noise_s: float, state_dropout_prob: float) -> FlowDraws:
        """Noise of ``shape`` per sample, the flow time and the state-dropout flags for one forward."""
        step_key = int(torch.randint(0, 1 << 62, (1,), generator=self.generator))
        keys = sample_index.tolist() if sample_index is not None else [-1] * batch_size
        concentration = torch.tensor([alpha, beta], dtype=torch.float32)
        noises, times, drops = [], [], []
        for position, key in enumerate(keys):
            sample_seed = mix_seed(step_key, key) if key >= 0 else mix_seed(step_key, 1 << 40, self.rank, position)
            g = torch.Generator().manual_seed(sample_seed)
            noises.append(torch.randn(shape, generator=g))
            gammas = torch._standard_gamma(concentration, generator=g)
            times.append((1.0 - gammas[0] / gammas.sum()) * noise_s)
            drops.append(bool(torch.rand((), generator=g) < state_dropout_prob))
        return FlowDraws(noise=torch.stack(noises), t=torch.stack(times).float(),
                         drop_state=torch.tensor(drops, dtype=torch.bool))

"""Sample indices of the ``dreamzero`` strategy (``DatasetPlan.sample_index`` builders).

Flat index: DreamZero numbers its samples (trajectory, step) over every frame of every episode, in the order of
``meta/episodes.jsonl``; precomputed caches are keyed by that number. Each sample records it as ``flat_index``
(with ``trajectory_id`` and ``base_index``), whatever subset of episodes or anchors the dataset reads.

- :class:`WindowIndex` (LIBERO, agibot, yam): every frame is an anchor; each key group reads fixed offsets from
  the anchor, clamped into the episode (DreamZero pads with the first / last row); ``<key>_is_pad`` marks the
  clamped rows.
- :class:`LanguageChunkIndex` (DROID ``language_chunk_sampling``): chunks of 24 steps anchored at the base step
  and every 24 steps before / after it while the anchor's language equals the base step's (:func:`language_chunks`).
  A base step without a valid chunk is left out (DreamZero crashes on it: ``keep_empty`` reproduces that
  sample list, whose empty samples then raise a DataError naming the step); ``require_full`` keeps only bases
  with ``max_chunk_size`` chunks. :meth:`LanguageChunkIndex.position_of` maps a flat index to a position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from embodied_core.errors import DataError
from embodied_data.lerobot.metadata import LeRobotMeta
from embodied_data.lerobot.table import EpisodeTable
from embodied_data.strategies.base import SampleQuery

__all__ = ["CHUNK", "LanguageChunkIndex", "LanguageChunkIndexBuilder", "WindowIndex", "WindowIndexBuilder",
           "chunk_counts", "language_chunks", "reference_flat_offsets"]

CHUNK = 24
"""Steps per DROID language chunk (DreamZero's fixed action chunk)."""
_VIDEO_OFFSETS = (0, 3, 6, 9, 12, 15, 18, 21)


def reference_flat_offsets(meta: LeRobotMeta) -> dict[int, int]:
    """Episode -> flat index of its first frame, over every episode of ``meta`` in ``episodes.jsonl`` order."""
    offsets, total = {}, 0
    for episode, info in meta.episodes.items():
        offsets[int(episode)] = total
        total += int(info.length)
    return offsets


def _anchors(first: int, language: np.ndarray, length: int, limit: int, accept: Any) -> list[int]:
    """Anchors in DreamZero's visiting order: ``first``, then alternately back / forward by 24 while the language
    at the anchor equals ``language[first]``; ``accept(anchor, taken)`` adds one (returns False when full)."""
    taken: list[int] = []
    accept(first, taken)
    target = language[first]
    step, back_done, fwd_done = 1, False, False
    while len(taken) < limit and not (back_done and fwd_done):
        if not back_done:
            back = first - CHUNK * step
            if back < 0 or language[back] != target:
                back_done = True
            else:
                accept(back, taken)
        if len(taken) >= limit:
            break
        if not fwd_done:
            fwd = first + CHUNK * step
            if fwd >= length or language[fwd] != target:
                fwd_done = True
            else:
                accept(fwd, taken)
        step += 1
    return taken


def language_chunks(language: Sequence[Any] | np.ndarray, base: int, max_chunks: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(video, state, action)`` episode frame indices of the DROID language chunks around ``base``.

    Video: 8 frames (offsets 0, 3, ..., 21) per chunk, at most ``8 * max_chunks + 1`` frames, plus one final
    frame 3 after the last (when that frame is outside the episode or no room is left, the last chunk is given
    up instead, keeping ``8n + 1`` frames). State: one row per chunk anchor. Action: 24 rows per chunk. A video
    chunk needs ``anchor + 23`` inside the episode, state / action chunks ``anchor + 24``; state and action take
    as many chunks as the video kept. All three are empty when no chunk fits.
    """
    language = np.asarray(language, dtype=object)
    length = len(language)
    first = max(0, min(int(base), length - 1))
    max_frames = 8 * max_chunks + 1

    def add_video(anchor: int, taken: list[int]) -> None:
        if anchor >= 0 and anchor + 23 < length and len(taken) + len(_VIDEO_OFFSETS) <= max_frames:
            taken.extend(anchor + o for o in _VIDEO_OFFSETS)

    frames = sorted(set(_anchors(first, language, length, max_frames, add_video)))[:max_frames]
    empty = np.zeros(0, dtype=np.int64)
    if not frames:
        return empty, empty, empty
    extra = frames[-1] + 3
    if extra < length and len(frames) < max_frames:
        frames.append(extra)
    elif len(frames) <= 8:
        return empty, empty, empty
    else:
        frames = frames[:-7]
    chunks = (len(frames) - 1) // 8
    limit = min(chunks, max_chunks)

    def add_state(anchor: int, taken: list[int]) -> None:
        if len(taken) < limit and anchor >= 0 and anchor + CHUNK < length:
            taken.append(anchor)

    states = sorted(set(_anchors(first, language, length, limit, add_state)))

    def add_action(anchor: int, taken: list[int]) -> None:
        if anchor >= 0 and anchor + CHUNK < length and len(taken) // CHUNK < limit:
            taken.extend(range(anchor, anchor + CHUNK))

    actions = sorted(set(_anchors(first, language, length, CHUNK * limit, add_action)))
    actions = actions[:min(len(actions), CHUNK * max_chunks) // CHUNK * CHUNK]
    return (np.asarray(frames, dtype=np.int64), np.asarray(states, dtype=np.int64),
            np.asarray(actions, dtype=np.int64))


def chunk_counts(language: Sequence[Any] | np.ndarray, max_chunks: int) -> np.ndarray:
    """Video chunk count of :func:`language_chunks` for every base step of one episode, vectorized over the bases
    (what the index builder needs; the anchors follow DreamZero's visiting order: the base, then back / forward by
    24 alternately while the language matches, the first ``max_chunks`` valid ones)."""
    _, codes = np.unique(np.asarray(language, dtype=object).astype(str), return_inverse=True)
    length = len(codes)
    bases = np.arange(length)
    taken = (bases + 23 < length).astype(np.int64)
    top = np.where(taken > 0, bases, -1)
    back_alive = np.ones(length, dtype=bool)
    fwd_alive = np.ones(length, dtype=bool)
    step = 1
    while (back_alive | fwd_alive).any() and (taken < max_chunks).any():
        back = bases - CHUNK * step
        back_alive &= (back >= 0) & (codes[np.clip(back, 0, length - 1)] == codes)
        accept = back_alive & (taken < max_chunks)
        taken += accept
        top = np.where(accept & (back > top), back, top)
        fwd = bases + CHUNK * step
        fwd_alive &= (fwd < length) & (codes[np.clip(fwd, 0, length - 1)] == codes)
        accept = fwd_alive & (fwd + 23 < length) & (taken < max_chunks)
        taken += accept
        top = np.where(accept, fwd, top)
        step += 1
    keep_all = top + 24 < length
    return np.where(taken == 0, 0, np.where(keep_all, taken, np.where(taken >= 2, taken - 1, 0)))


def _episode_bounds(table: EpisodeTable) -> list[tuple[int, int]]:
    starts = np.unique(table.episode_start)
    return [(int(s), int(table.episode_end[s])) for s in starts]


def _ranges_of(episodes: np.ndarray) -> list[tuple[int, int]]:
    out, start = [], 0
    for i in range(1, len(episodes) + 1):
        if i == len(episodes) or episodes[i] != episodes[start]:
            out.append((start, i))
            start = i
    return out


@attrs.frozen(kw_only=True)
class WindowIndex:
    """Every frame an anchor; fixed offsets per key, clamped into the episode (see module docstring)."""

    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    flat: np.ndarray
    episodes: np.ndarray
    offsets: Mapping[str, tuple[int, ...]]

    def __len__(self) -> int:
        return len(self.rows)

    def query(self, position: int) -> SampleQuery:
        """Anchor row, clamped rows per key and their pad masks, plus the flat index."""
        row, start, end = int(self.rows[position]), int(self.starts[position]), int(self.ends[position])
        rows, pad = {}, {}
        for key, offsets in self.offsets.items():
            wanted = row + np.asarray(offsets, dtype=np.int64)
            rows[key] = np.clip(wanted, start, end - 1)
            pad[key] = (wanted < start) | (wanted >= end)
        info = {"flat_index": int(self.flat[position]), "trajectory_id": int(self.episodes[position]),
                "base_index": row - start}
        return SampleQuery(row=row, rows=rows, pad=pad, info=info)

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` positions per episode."""
        return _ranges_of(self.episodes)


@attrs.frozen(kw_only=True)
class WindowIndexBuilder:
    """Builds a :class:`WindowIndex`; ``offsets``: dataset key (camera or column) -> frame offsets."""

    offsets: Mapping[str, tuple[int, ...]]

    def __call__(self, table: EpisodeTable, meta: LeRobotMeta) -> WindowIndex:
        flat0 = reference_flat_offsets(meta)
        episodes = table.columns["episode_index"].astype(np.int64)
        frames = np.arange(len(table)) - table.episode_start
        flat = np.asarray([flat0[int(e)] for e in episodes], dtype=np.int64) + frames
        return WindowIndex(rows=np.arange(len(table), dtype=np.int64), starts=table.episode_start.copy(),
                           ends=table.episode_end.copy(), flat=flat, episodes=episodes, offsets=dict(self.offsets))


@attrs.frozen(kw_only=True)
class LanguageChunkIndex:
    """DROID language-chunk anchors (see module docstring)."""

    rows: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    flat: np.ndarray
    episodes: np.ndarray
    chunks: np.ndarray
    language: np.ndarray
    max_chunks: int
    camera_keys: tuple[str, ...]
    state_columns: tuple[str, ...]
    action_columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def position_of(self, flat_index: int) -> int:
        """Our position of DreamZero's flat index ``flat_index``; a KeyError when the index left it out."""
        hits = np.flatnonzero(self.flat == int(flat_index))
        if not hits.size:
            raise KeyError(f"flat index {flat_index} is not a sample of this index (no valid language chunk, or "
                           "excluded by require_full_language_chunks)")
        return int(hits[0])

    def query(self, position: int) -> SampleQuery:
        """Rows of the chunks of one anchor; ``language_chunk_indices`` (episode frames) in ``info``."""
        row, start, end = int(self.rows[position]), int(self.starts[position]), int(self.ends[position])
        base = row - start
        info: dict[str, Any] = {"flat_index": int(self.flat[position]), "trajectory_id": int(self.episodes[position]),
                                "base_index": base}
        video, state, action = language_chunks(self.language[start:end], base, self.max_chunks)
        info["language_chunk_indices"] = {"video": video.tolist(), "state": state.tolist(), "action": action.tolist()}
        if not video.size:
            raise DataError(f"episode {int(self.episodes[position])}, step {base} (flat index "
                            f"{int(self.flat[position])}): no language chunk of 24 steps fits inside its language "
                            "segment and episode; it is a sample only because data.keep_empty_language_chunks=true "
                            "(the reference behaviour)")
        rows: dict[str, np.ndarray] = {cam: start + video for cam in self.camera_keys}
        rows.update({col: start + state for col in self.state_columns})
        rows.update({col: start + action for col in self.action_columns})
        return SampleQuery(row=row, rows=rows, info=info)

    def episode_ranges(self) -> list[tuple[int, int]]:
        """``(start, stop)`` positions per episode (episodes without anchors are left out)."""
        return _ranges_of(self.episodes)


@attrs.frozen(kw_only=True)
class LanguageChunkIndexBuilder:
    """Builds a :class:`LanguageChunkIndex` from the table's language column."""

    language_column: str
    max_chunks: int
    camera_keys: tuple[str, ...]
    state_columns: tuple[str, ...]
    action_columns: tuple[str, ...]
    keep_empty: bool = False
    require_full: bool = False

    def __call__(self, table: EpisodeTable, meta: LeRobotMeta) -> LanguageChunkIndex:
        if self.language_column not in table.columns:
            raise DataError(f"{meta.root}: language column {self.language_column!r} (meta/modality.json annotation) "
                            f"is not in the data files (columns: {', '.join(table.columns)})")
        language = np.asarray(table.columns[self.language_column], dtype=object)
        flat0 = reference_flat_offsets(meta)
        rows, flat, episodes, chunks = [], [], [], []
        for start, end in _episode_bounds(table):
            episode = int(table.columns["episode_index"][start])
            counts = chunk_counts(language[start:end], self.max_chunks)
            for base, count in enumerate(counts.tolist()):
                if (count == 0 and not self.keep_empty) or (self.require_full and count != self.max_chunks):
                    continue
                rows.append(start + base)
                flat.append(flat0[episode] + base)
                episodes.append(episode)
                chunks.append(count)
        anchors = np.asarray(rows, dtype=np.int64)
        return LanguageChunkIndex(
            rows=anchors, starts=table.episode_start[anchors], ends=table.episode_end[anchors],
            flat=np.asarray(flat, dtype=np.int64), episodes=np.asarray(episodes, dtype=np.int64),
            chunks=np.asarray(chunks, dtype=np.int64), language=language, max_chunks=self.max_chunks,
            camera_keys=self.camera_keys, state_columns=self.state_columns, action_columns=self.action_columns)

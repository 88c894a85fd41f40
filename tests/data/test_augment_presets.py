"""The groot, cosmos3, dreamzero and openpi presets (and cosmos3's ``data.use_image_augmentation``) against their
references written with torchvision's own transforms, bit for bit given the same draws.

Each reference is the reference's composition of torchvision transforms run under ``torch.manual_seed(seed)``; the
pipeline runs with ``seed_by_index`` so that a sample of index ``seed`` draws from the same seed. Frame sizes include
240 x 352 and odd sizes; every case has several cameras and video windows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from benchmarks.augment_frames import camera_frames
from embodied_core.config.image_augmentation import ImageAugmentationConfig
from embodied_core.data.image_augmentation import build_ops, resolve_augmentation
from embodied_core.data.image_augmentation.pipeline import ImageAugmentation

v2 = pytest.importorskip("torchvision.transforms.v2")


def _preset(name: str, **overrides: object) -> ImageAugmentation:
    settings = resolve_augmentation(ImageAugmentationConfig(preset=name, **overrides))
    assert settings is not None
    return ImageAugmentation(settings, build_ops(settings), seed=0, seed_by_index=True)


def _seeded(seed: int, run: Callable[[], torch.Tensor]) -> torch.Tensor:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return run()


def _cameras(shape: tuple[int, int], names: list[str], frames: int) -> dict[str, torch.Tensor]:
    return {f"observation.images.{n}": camera_frames(*shape, camera=c, frames=frames) for c, n in enumerate(names)}


def _split(stack: torch.Tensor, keys: list[str]) -> dict[str, torch.Tensor]:
    return dict(zip(keys, torch.chunk(stack, len(keys), dim=0), strict=True))


def _assert_equal(ours: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str) -> None:
    for key, value in expected.items():
        assert ours[key].shape == value.shape, f"{what} {key}"
        differ = int((ours[key] != value).sum())
        assert differ == 0, f"{what} {key}: {differ} values differ"


@pytest.mark.parametrize("shape", [(121, 84)], ids=["121x84"])
def test_groot_is_gr00ts_torchvision_transform_with_one_draw_per_sample(shape: tuple[int, int]) -> None:
    """GR00T N1.7 build_image_transformations: Resize 256, RandomCrop 230, Resize 256, ColorJitter, on uint8."""
    pipeline = v2.Compose([v2.Resize((256, 256)), v2.RandomCrop((230, 230)), v2.Resize((256, 256)),
                           v2.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5, hue=0.08)])
    cameras = _cameras(shape, ["front", "wrist"], frames=2)
    keys = list(cameras)
    augmentation = _preset("groot")
    for seed in (3,):
        out, applied = augmentation.augment(cameras, epoch=0, index=seed)
        expected = _split(_seeded(seed, lambda: pipeline(torch.cat(list(cameras.values())))), keys)
        _assert_equal(out, expected, f"seed {seed}")
        assert applied[keys[0]] == applied[keys[1]]  # one draw for every camera and frame


@pytest.mark.parametrize("shape", [(61, 83)], ids=["61x83"])
def test_dreamzero_preset_is_loongforges_v2_pipeline(shape: tuple[int, int]) -> None:
    height, width = shape
    pipeline = v2.Compose([v2.RandomCrop((int(height * 0.95), int(width * 0.95))), v2.Resize(shape, antialias=True),
                           v2.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5, hue=0.08)])
    cameras = _cameras(shape, ["left", "right"], frames=2)
    augmentation = _preset("dreamzero")
    floats = torch.cat([v.float() / 255.0 for v in cameras.values()])
    for seed in (0, 5):
        out, _ = augmentation.augment(cameras, epoch=0, index=seed)
        expected = _split((_seeded(seed, lambda: pipeline(floats)) * 255).to(torch.uint8), list(cameras))
        _assert_equal(out, expected, f"seed {seed}")


def _cosmos3_augmentor(height: int, width: int) -> object:
    """LoongForge's ``build_image_augmentor`` with its default COSMOS3_TV_TRANSFORMS=v1."""
    import torchvision.transforms as v1

    return v1.Compose([v1.RandomCrop((int(height * 0.95), int(width * 0.95))), v1.Resize((height, width),
                       antialias=True), v1.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5, hue=0.08)])


def _one_thread(run: Callable[[], torch.Tensor]) -> torch.Tensor:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # LoongForge's loader workers
    try:
        return run()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("shape", [(97, 130)], ids=["97x130"])
def test_cosmos3_preset_is_loongforges_augmentor(shape: tuple[int, int]) -> None:
    augmentor = _cosmos3_augmentor(*shape)
    cameras = _cameras(shape, ["wrist", "left", "right"], frames=2)
    augmentation = _preset("cosmos3")
    floats = torch.cat([(v.contiguous() / 255.0).float() for v in cameras.values()])
    for seed in (1, 2):
        out, _ = augmentation.augment(cameras, epoch=0, index=seed)
        stack = _one_thread(lambda: _seeded(seed, lambda: augmentor(floats)))  # noqa: B023
        expected = _split((stack * 255.0).clamp(0, 255).to(torch.uint8), list(cameras))
        _assert_equal(out, expected, f"seed {seed}")


@pytest.mark.parametrize("shape", [(48, 64), (240, 352)], ids=["48x64", "240x352"])
def test_cosmos3_use_image_augmentation_is_loongforges_sample_video(shape: tuple[int, int]) -> None:
    """The cosmos3 model's data.use_image_augmentation: LoongForge's DROID video (augmented stack -> concat view ->
    uint8) under --deterministic-mode (torch.manual_seed(idx))."""
    from embodied_models.cosmos3.data.augment import ViewAugmentation
    from embodied_models.cosmos3.data.reader import DroidWindowTransform

    keys = ("wrist", "left", "right")
    frames = 2
    views = [camera_frames(*shape, camera=c, frames=frames) for c in range(3)]
    transform = DroidWindowTransform(camera_keys=keys, joint_action_key="ja", gripper_action_key="ga",
                                     joint_state_key="js", gripper_state_key="gs", fps=15.0, domain_id=8,
                                     caption_choice="position", augmentation=ViewAugmentation(by_position=True))
    augmentor = _cosmos3_augmentor(*shape)
    for position in (6,):
        sample = {**dict(zip(keys, views, strict=True)), "js": torch.zeros(frames, 7), "gs": torch.zeros(frames, 1),
                  "ja": torch.zeros(frames, 7), "ga": torch.zeros(frames, 1), "task": "pick", "dataset_index": position,
                  "episode_index": 0, "start_frame": 0, "task_index": 0}
        video = transform(sample)["video"]

        def reference() -> torch.Tensor:
            stack = augmentor(torch.cat([(v.contiguous() / 255.0).float() for v in views]))
            wrist, left, right = torch.split(stack, frames)
            half = (shape[0] // 2, shape[1] // 2)
            bottom = torch.cat([F.interpolate(v, size=half, mode="bilinear", align_corners=False)
                                for v in (left, right)], dim=-1)
            out = torch.cat([wrist, bottom], dim=-2)
            return (out * 255.0).clamp(0.0, 255.0).to(torch.uint8).permute(1, 0, 2, 3)

        expected = _one_thread(lambda: _seeded(position, reference))  # noqa: B023
        assert video.shape == expected.shape
        assert int((video != expected).sum()) == 0, f"position {position}"


def test_openpi_preset_is_its_semantics_on_torchvision() -> None:
    """Non-wrist cameras: crop 95 %, resize back, rotate +-5 degrees, then (p 0.5) ColorJitter(0.3, 0.4, 0.5); wrist
    cameras only the jitter; float frames rounded to uint8; each camera draws on its own, in order."""
    shape = (64, 80)
    base = v2.Compose([v2.RandomCrop((int(shape[0] * 0.95), int(shape[1] * 0.95))), v2.Resize(shape),
                       v2.RandomRotation(5.0, interpolation=v2.InterpolationMode.BILINEAR),
                       v2.RandomApply([v2.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5)], p=0.5)])
    wrist = v2.RandomApply([v2.ColorJitter(brightness=0.3, contrast=0.4, saturation=0.5)], p=0.5)
    cameras = _cameras(shape, ["base_0_rgb", "left_wrist_0_rgb"], frames=2)
    (base_key, wrist_key) = list(cameras)
    augmentation = _preset("openpi")
    jittered = []
    for seed in range(6):
        out, applied = augmentation.augment(cameras, epoch=0, index=seed)

        def reference() -> tuple[torch.Tensor, torch.Tensor]:
            return base(cameras[base_key].float() / 255.0), wrist(cameras[wrist_key].float() / 255.0)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            expected = [(x * 255.0).round().clamp(0, 255).to(torch.uint8) for x in reference()]
        _assert_equal(out, dict(zip((base_key, wrist_key), expected, strict=True)), f"seed {seed}")
        assert [op["op"] for op in applied[base_key]][:3] == ["random_crop", "resize", "random_rotation"]
        assert {op["op"] for op in applied[wrist_key]} <= {"color_jitter"}
        jittered.append(bool(applied[wrist_key]))
    assert any(jittered) and not all(jittered)  # p = 0.5: some draws jitter, some do not

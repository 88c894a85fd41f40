"""The named augmentations of ``data.image_augmentation.preset`` (factories of the preset specs). No torch here.

Each returns the settings its reference uses. "Bit for bit given the same draws" means: under
``torch.manual_seed(s)`` the reference's transforms draw the parameters our pipeline draws for a sample whose seed
is ``s`` (same calls, same order), and the uint8 frames are then equal (tests/data/test_augment_*.py).
"""

from __future__ import annotations

from typing import Any

__all__ = ["cosmos3", "dreamzero", "groot", "lerobot", "openpi"]

_WRIST = ["*wrist*"]


def lerobot() -> dict[str, Any]:
    """lerobot 0.6.1's ``ImageTransformsConfig`` defaults, as ``lerobot-train`` applies them.

    Six weighted transforms (brightness 0.8-1.2, contrast 0.8-1.2, saturation 0.5-1.5, hue +-0.05 as one-factor
    ColorJitters, SharpnessJitter 0.5-1.5, RandomAffine +-5 degrees and 5 % translation), of which
    ``max_num_transforms`` = 3 are picked per draw by ``torch.multinomial`` without replacement and applied in list
    order (``random_order`` false). lerobot-train decodes uint8 frames (``return_uint8=True``) and transforms each
    camera's ``[T, C, H, W]`` window separately, cameras in the dataset's order: ``compute_dtype`` uint8 and
    ``camera_draws`` independent. Matched bit for bit (golden from lerobot's own ImageTransforms).
    """
    return {
        "ops": [
            {"op": "color_jitter", "brightness": [0.8, 1.2]},
            {"op": "color_jitter", "contrast": [0.8, 1.2]},
            {"op": "color_jitter", "saturation": [0.5, 1.5]},
            {"op": "color_jitter", "hue": [-0.05, 0.05]},
            {"op": "sharpness_jitter", "sharpness": [0.5, 1.5]},
            {"op": "random_affine", "degrees": [-5.0, 5.0], "translate": [0.05, 0.05]},
        ],
        "max_num_ops": 3,
        "random_order": False,
        "camera_draws": "independent",
        "compute_dtype": "uint8",
    }


def openpi() -> dict[str, Any]:
    """openpi's pi0/pi0.5 training augmentation (``preprocess_observation(train=True)``), on torchvision.

    Matched (the documented semantics): on float frames in [0, 1], cameras whose name does not contain "wrist" get a
    crop of 95 % of each side at a random place, a resize back to their size and a rotation of up to +-5 degrees;
    every camera then gets colour jitter of strength brightness 0.3, contrast 0.4, saturation 0.5, applied with
    probability 0.5 (augmax's default ``p``, which openpi keeps).

    Not matched (augmax is JAX and not installable here): its draws come from JAX's PRNG (split per image from one
    key that every camera shares), its crop-resize-rotate is one warp resampled once, and its ColorJitter shifts
    value and saturation additively in HSV space (with augmax's default hue jitter, which openpi does not name);
    here each step is torchvision's (bilinear resize with antialias, bilinear rotation, multiplicative RGB factors
    [1 - x, 1 + x], no hue), each camera draws on its own, and the result is rounded to uint8.
    """
    return {
        "ops": [
            {"op": "random_crop", "scale": 0.95, "skip_cameras": _WRIST},
            {"op": "resize", "skip_cameras": _WRIST},
            {"op": "random_rotation", "degrees": 5.0, "interpolation": "bilinear", "skip_cameras": _WRIST},
            {"op": "color_jitter", "brightness": 0.3, "contrast": 0.4, "saturation": 0.5, "p": 0.5},
        ],
        "camera_draws": "independent",
        "compute_dtype": "float32",
        "quantize": "round",
    }


def groot() -> dict[str, Any]:
    """GR00T N1.7's training image transform, its torchvision branch (``build_image_transformations``) with the
    N1.7 sizes: resize to 256 x 256, a random 230 x 230 crop, resize to 256 x 256, ColorJitter(brightness 0.3,
    contrast 0.4, saturation 0.5, hue 0.08), on uint8 frames. Bit for bit given the same draws.

    The draw is shared by every camera and frame of the sample, as GR00T's albumentations branch (the N1.7 release
    default, ``use_albumentations``) replays one draw over all of them; its torchvision branch draws per frame. The
    albumentations branch itself (OpenCV INTER_AREA resizes, NumPy-drawn crop, albumentations' ColorJitter) cannot
    be reproduced with torchvision.
    """
    return {
        "ops": [
            {"op": "resize", "size": [256, 256]},
            {"op": "random_crop", "size": [230, 230]},
            {"op": "resize", "size": [256, 256]},
            {"op": "color_jitter", "brightness": 0.3, "contrast": 0.4, "saturation": 0.5, "hue": 0.08},
        ],
        "camera_draws": "shared",
        "compute_dtype": "uint8",
    }


def cosmos3() -> dict[str, Any]:
    """LoongForge cosmos3's ``use_image_augmentation`` (``build_image_augmentor``): RandomCrop of 95 % of each side,
    Resize back (bilinear, antialias), ColorJitter(0.3, 0.4, 0.5, 0.08), once over the stack of every camera's frames
    (one shared draw), on float frames / 255, truncated to uint8; torchvision v1 kernels (LoongForge's default
    ``COSMOS3_TV_TRANSFORMS=v1``; the draws are v2's too). Under --deterministic-mode a sample is seeded with its
    index (``torch.manual_seed(idx)``), as LoongForge does. Bit for bit given the same draws, up to the frames this
    preset hands on: LoongForge keeps floats through its concat-view resize (the cosmos3 model's own
    ``data.use_image_augmentation`` runs this augmentation there).
    """
    return {
        "ops": [
            {"op": "random_crop", "scale": 0.95},
            {"op": "resize"},
            {"op": "color_jitter", "brightness": 0.3, "contrast": 0.4, "saturation": 0.5, "hue": 0.08,
             "kernels": "v1"},
        ],
        "camera_draws": "shared",
        "compute_dtype": "float32",
        "quantize": "truncate",
        "deterministic_seed": "sample_index",
    }


def dreamzero() -> dict[str, Any]:
    """DreamZero's training frames (LoongForge ``VideoCrop`` / ``VideoResize`` / ``VideoColorJitter``, torchvision
    v2): RandomCrop of 95 % of each side, resize (bilinear, antialias), ColorJitter(0.3, 0.4, 0.5, 0.08), one draw
    for every view and frame, on float frames / 255, truncated to uint8 (DreamZero's ``VideoToNumpy``). Bit for bit
    given the same draws. DreamZero resizes to the model's frame size; this preset resizes back to each camera's size
    (set the resize op's ``size`` in ``ops`` for another). The dreamzero model runs this pipeline itself
    (``data.enable_color_jitter``).
    """
    return {
        "ops": [
            {"op": "random_crop", "scale": 0.95},
            {"op": "resize"},
            {"op": "color_jitter", "brightness": 0.3, "contrast": 0.4, "saturation": 0.5, "hue": 0.08},
        ],
        "camera_draws": "shared",
        "compute_dtype": "float32",
        "quantize": "truncate",
    }

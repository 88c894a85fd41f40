"""Entry-point specs of the image augmentation ops and presets (``embodied.image_augmentations``). No torch here."""

from __future__ import annotations

from embodied_core.registry.specs import ImageAugmentationPresetSpec, ImageOpSpec
from embodied_data.augment import params
from embodied_data.augment._torchvision import INSTALL_HINT

_OPS = "embodied_data.augment.ops"
_PRESETS = "embodied_data.augment.presets"
_NEEDS = {"requires": ("torchvision",), "install_hint": INSTALL_HINT}

COLOR_JITTER = ImageOpSpec(name="color_jitter", description="brightness/contrast/saturation/hue in a random order "
                           "(torchvision ColorJitter)", factory=f"{_OPS}:build_color_jitter",
                           params=params.ColorJitterParams, **_NEEDS)
SHARPNESS_JITTER = ImageOpSpec(name="sharpness_jitter", description="a random sharpness factor (lerobot's "
                               "SharpnessJitter, torchvision adjust_sharpness)",
                               factory=f"{_OPS}:build_sharpness_jitter", params=params.SharpnessJitterParams, **_NEEDS)
RANDOM_AFFINE = ImageOpSpec(name="random_affine", description="random rotation/translation/scale/shear "
                            "(torchvision RandomAffine)", factory=f"{_OPS}:build_random_affine",
                            params=params.RandomAffineParams, **_NEEDS)
RANDOM_ROTATION = ImageOpSpec(name="random_rotation", description="a random rotation (torchvision RandomRotation)",
                              factory=f"{_OPS}:build_random_rotation", params=params.RandomRotationParams, **_NEEDS)
RANDOM_CROP = ImageOpSpec(name="random_crop", description="a crop at a random place, by size or kept fraction "
                          "(torchvision RandomCrop)", factory=f"{_OPS}:build_random_crop",
                          params=params.RandomCropParams, **_NEEDS)
RESIZE = ImageOpSpec(name="resize", description="resize to a size or back to the camera's size (torchvision resize)",
                     factory=f"{_OPS}:build_resize", params=params.ResizeParams, **_NEEDS)

LEROBOT = ImageAugmentationPresetSpec(name="lerobot", description="lerobot 0.6.1 ImageTransformsConfig defaults",
                                      factory=f"{_PRESETS}:lerobot", reference="lerobot 0.6.1 lerobot-train")
OPENPI = ImageAugmentationPresetSpec(name="openpi", description="pi0/pi0.5 training augmentation (crop, resize, "
                                     "rotate; colour jitter on every camera)", factory=f"{_PRESETS}:openpi",
                                     reference="openpi preprocess_observation (augmax; semantics on torchvision)")
GROOT = ImageAugmentationPresetSpec(name="groot", description="GR00T N1.7 resize, random crop, resize, colour jitter",
                                    factory=f"{_PRESETS}:groot",
                                    reference="Isaac-GR00T N1.7 build_image_transformations (torchvision branch)")
COSMOS3 = ImageAugmentationPresetSpec(name="cosmos3", description="LoongForge cosmos3 use_image_augmentation: "
                                      "RandomCrop 0.95, Resize, ColorJitter", factory=f"{_PRESETS}:cosmos3",
                                      reference="LoongForge cosmos3 build_image_augmentor")
DREAMZERO = ImageAugmentationPresetSpec(name="dreamzero", description="DreamZero crop 0.95, resize, colour jitter",
                                        factory=f"{_PRESETS}:dreamzero",
                                        reference="LoongForge DreamZero VideoCrop/VideoResize/VideoColorJitter")

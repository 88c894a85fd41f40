"""Video backends (group ``embodied.video_backends``): decode frames at timestamps as uint8 ``[N, C, H, W]``.

Import :mod:`embodied_data.video.backends` (torch) for the classes; this package module stays light so the
specs can be loaded without torch.
"""

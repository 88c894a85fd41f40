"""Makes PyPI's torchvision import next to a CPU-only torch build (run with the venv's python; idempotent).

PyPI's torchvision wheel for a torch release links the CUDA torch libraries, so with our CPU torch its compiled
ops (``torchvision._C``) do not load. The pure-Python parts (``torchvision.transforms.v2`` and its functional
kernels, which the image augmentation layer and lerobot use) do not need them, but ``torchvision/_meta_registrations.py``
registers fake kernels for two compiled ops (``nms``, ``qnms``) unconditionally, and registering a fake kernel for
an operator that does not exist fails at ``import torchvision``. This rewrites those two decorators to skip the
registration when the compiled ops are absent, which is what that module already does for its other ops
(``register_meta`` checks ``torchvision.extension._has_ops()``). On a host where the ops load nothing changes.

    VENV/bin/python scripts/patch_torchvision.py
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

_DECORATOR = re.compile(r'^@torch\.library\.register_fake\("(torchvision::\w+)"\)$', flags=re.MULTILINE)
_GUARDED = r'@(torch.library.register_fake("\1") if torchvision.extension._has_ops() else (lambda fn: fn))'


def main() -> int:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        print("patch_torchvision: torchvision is not installed in this interpreter", file=sys.stderr)
        return 1
    path = pathlib.Path(spec.origin).parent / "_meta_registrations.py"
    text = path.read_text()
    patched, count = _DECORATOR.subn(_GUARDED, text)
    if count:
        path.write_text(patched)
    print(f"patch_torchvision: {path}: {count} fake-kernel registration(s) guarded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

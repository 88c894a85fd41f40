"""What the VLA ports (pi05, smolvla, xvla, groot_n1_7) share, one job per module.

- :mod:`.fields`: config field blocks and mixins (the openpi-style flow-time constants, the tokenizer folder);
  no torch, ``--help`` reads them.
- :mod:`.checks`: run-config rules every port states the same way (widths, the tokenizer requirement) and the
  ports' ``check_run_config``; no torch.
- :mod:`.spec`: the entry-point spec every port declares; no torch.
- :mod:`.tokenizers`: opening a local Hugging Face tokenizer folder, and choosing it or the built-in one; no torch.
- :mod:`.checkpoint`: the strict load tail (key map -> report -> strict check) of every port's loader.
- :mod:`.transform`: the base of the pi05 / smolvla / xvla sample transforms (state, action targets, truncation,
  postprocessing).
- :mod:`.features`: per-sample state/action/task/token steps of the sample transforms.
- :mod:`.batch`: ``to`` / ``pin_memory`` of the attrs batch classes.
- :mod:`.flow`: the pi0-style flow (pi05, smolvla): loss elements, sin-cos time embedding, Euler sampling over a
  prefix cache (``PrefixCachedFlow``).
- :mod:`.masks`: the block-causal attention rule and RoPE positions of the pi0-style ports.

What only looks alike stays in the ports; each family README says what it shares and what it keeps apart.
"""

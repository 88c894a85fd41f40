"""What the VLA ports (pi05, smolvla, xvla, groot_n1_7) share, one job per module.

- :mod:`.fields`: config field blocks and mixins (the openpi-style flow-time constants, the tokenizer folder);
  no torch, ``--help`` reads them.
- :mod:`.checks`: run-config rules every port states the same way (widths, the tokenizer requirement); no torch.
- :mod:`.spec`: the entry-point spec every port declares; no torch.
- :mod:`.tokenizers`: opening a local Hugging Face tokenizer folder, and choosing it or the built-in one; no torch.
- :mod:`.checkpoint`: the strict load tail (key map -> report -> strict check) of every port's loader.

What only looks alike stays in the ports; each family README says what it shares and what it keeps apart.
"""

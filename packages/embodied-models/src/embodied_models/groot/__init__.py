"""What the GR00T ports (groot_n1_6, groot_n1_7) share, one job per module.

- :mod:`.dit`: the AlternateVL DiT (blocks, alternating text/image cross-attention masks, AdaLayerNorm, timestep
  encoder) and N1.7's VL self-attention stack.
- :mod:`.layers`: the category-specific (per-embodiment) layers, the multi-embodiment action encoder and its sin-cos
  time features, the masked flow-matching loss.
- :mod:`.head`: the flow-matching velocity, training terms and Euler sampling every GR00T head runs the same way.
- :mod:`.draws`: the per-sample keyed training draws (noise, flow time, state dropout).
- :mod:`.normalize`: GR00T's per-dimension min-max / percentile / mean-std state and action normalization.
- :mod:`.images`: the shortest-edge resize, centre crop and final resize of the views.
- :mod:`.transform`: the port-independent steps of the sample transforms (views, instruction, padded state and
  actions, normalizers, postprocessing).
- :mod:`.embodiments`: embodiment-tag tables and their messages (each port keeps its own table).
- :mod:`.trainer`: the draw-generator trainer and the meta/modality.json camera names.
- :mod:`.model`: the model plugin base (generator members, draws, training terms, loss, sampling, LoRA names).
- :mod:`.config`: the config fields both ports declare alike, placed in each port's order, and the shared rules.
- :mod:`.batch`: the fields every GR00T batch has.
- :mod:`.backbone`: the language-model config sizes, the causal + padding mask, the pixel statistics and RoPE
  buffers.
- :mod:`.processor`: the built-in byte-level tokenizer, the pad id, the processor statistics checks.

What only looks alike stays in the ports (the towers and what the features are, the prompt layouts, the fields
whose defaults or docstrings differ): README.md says why, piece by piece.
"""

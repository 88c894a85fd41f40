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

What only looks alike stays in the ports (the backbones, the processors and prompt layouts, the configs).
"""

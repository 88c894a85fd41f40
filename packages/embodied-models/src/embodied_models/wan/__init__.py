"""Pieces of Wan2.2 shared by the Wan-based model plugins (lingbot_va, fastwam, dreamzero).

Each module has one job: :mod:`.rope` (3-D RoPE from grid ids), :mod:`.attention` (mask-aware SDPA / flex
dispatch, qk RMSNorm), :mod:`.modulation` (adaLN and timestep embeddings), :mod:`.patch` (patchify /
unpatchify), :mod:`.vae` (``AutoencoderKLWan``), :mod:`.text` (UMT5), :mod:`.flow` (shifted-sigma flow matching)
and :mod:`.cache` (atomic cache files and their meta data).
"""

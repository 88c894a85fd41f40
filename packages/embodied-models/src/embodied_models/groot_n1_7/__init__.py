"""GR00T N1.7 (Cosmos-Reason2-2B / Qwen3-VL backbone + multi-embodiment flow-matching DiT) as an embodied model."""

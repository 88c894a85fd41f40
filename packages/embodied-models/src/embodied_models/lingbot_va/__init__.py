"""LingBot-VA: a Wan2.2-based video-action world model (see README.md). Importing this package loads no torch."""

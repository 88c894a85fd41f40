"""Generic data plumbing used by the Trainer: resumable loader and index samplers."""

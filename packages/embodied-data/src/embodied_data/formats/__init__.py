"""Dataset formats (group ``embodied.dataset_formats``)."""

"""Trainers (group ``embodied.trainers``)."""

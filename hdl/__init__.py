"""Amaranth components of the accelerator: engines, output stage, memory port, chip."""

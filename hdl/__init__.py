"""Amaranth components of the accelerator (engines, FIFOs, output stage)."""

"""Simulation backends, memory models and simulator toolchain helpers."""

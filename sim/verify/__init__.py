"""Verification: cocotb testbenches of the engines and the chip, and the transaction
models and stream drivers they use."""

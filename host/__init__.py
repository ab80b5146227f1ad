"""The host: the training loop, the exponent policy, the chip driver and the device
protocol it speaks, the backends by name, the ``mixgcn`` CLI and the benchmarks."""

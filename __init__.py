"""mixgcn — a generator of full-graph GCN training accelerators after MixGCN.

The repository root is this package; its folders are the architecture:

- ``mixgcn.golden`` — numpy reference: datasets, normalised adjacency, the float GCN,
  the bit-exact fixed-point operators the RTL is verified against, and the backend
  protocol with its functional model;
- ``mixgcn.hdl`` — Amaranth components (engines, output stage, memory port, chip);
- ``mixgcn.gen`` — validated configurations, presets and generators (Verilog, boards);
- ``mixgcn.host`` — the training loop, the exponent policy, the chip driver, the device
  protocol, the ``mixgcn`` CLI and the benchmarks;
- ``mixgcn.sim`` — simulator builds, the simulated chip (a device serving the device
  protocol) and the testbenches.

docs/architecture.md describes the whole; docs/numbers.md the fixed-point contract.
"""

__version__ = "0.1.0"

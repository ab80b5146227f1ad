"""mixgcn — a generator of full-graph GCN training accelerators after MixGCN.

The repository root is this package; its folders are the architecture:

- ``mixgcn.golden`` — numpy reference: datasets, normalised adjacency, the float GCN
  and the bit-exact fixed-point operators the RTL is verified against;
- ``mixgcn.hdl`` — Amaranth components (engines, FIFOs, output stage);
- ``mixgcn.gen`` — validated configurations, presets and generators (Verilog, boards);
- ``mixgcn.sim`` — simulation backends, memory models and toolchain helpers;
- ``mixgcn.host`` — the training driver, backends and the ``mixgcn`` CLI.
"""

__version__ = "0.1.0"

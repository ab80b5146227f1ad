"""Simulation: building generated Verilog into simulators (:mod:`.build`), the simulated
chip ``--backend rtl`` runs (:mod:`.chip`), and the testbenches (:mod:`.verify`)."""

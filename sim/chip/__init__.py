"""What ``--backend rtl`` runs: the chip harness, its memory model, the chip server and
the host's end of it (:class:`~mixgcn.sim.chip.process.SimulatedChip`)."""

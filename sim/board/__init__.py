"""A board in simulation: the chip behind its host link (:class:`~mixgcn.hdl.host_link.
LinkedChip`) on the memory model, reached through its serial port (docs/link.md)."""

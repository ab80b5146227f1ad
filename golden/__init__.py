"""Pure-numpy reference: datasets, GCN maths, the bit-exact fixed-point operators, and
the backend protocol with the functional model that defines it (:mod:`.backend`).

Nothing here imports the hardware; the hardware is verified against this package.
"""

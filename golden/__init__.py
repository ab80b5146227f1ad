"""Pure-numpy reference: datasets, GCN maths and the bit-exact fixed-point operators.

Nothing here imports the hardware; the hardware is verified against this package.
"""

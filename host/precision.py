"""Fixed-point arithmetic for training: the host's exponent policy around a backend.

The chip computes integers; the host decides every tensor's exponent:

- tensors the host produces (features after dropout, weights, gradients of the loss)
  get the tightest exponent for their largest magnitude (:func:`quantize`);
- kernel outputs get their shift from **delayed scaling**: the output stage reports
  the largest ``|acc|`` of each operation, and the next execution of the same
  operation ("site", e.g. ``L0.fwd.agg``) shifts so that this magnitude, plus
  ``headroom`` bits for growth, fits the data width. The first execution of a site
  uses a hard bound instead (``max_i Σ_k |a_ik| · max |b|``), which cannot overflow.

The policy reads only what every backend returns, so golden and RTL runs choose the
same shifts and produce the same weights bit for bit.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mixgcn.golden.fixed import Fixed, dequantize, product_bound, quantize

__all__ = ["FixedOps"]


def _bound_bits(a, b) -> int:
    """Bit length of the bound no accumulator of ``a @ b`` can exceed."""
    return product_bound(a, b).bit_length()


class FixedOps:
    """The ops interface of :class:`mixgcn.golden.gcn.GCN` in block floating point."""

    def __init__(self, backend, headroom: int = 1):
        self.backend = backend
        self.width = backend.fmt.width
        self.headroom = headroom
        self.magnitude: dict[str, int] = {}  # site -> log2 bound of |value| seen last
        self.saturated = 0
        self.operations = 0

    # host-side tensors
    def adjacency(self, adj: sp.csr_array) -> Fixed:
        return quantize(adj, self.width)

    def tensor(self, site: str, x) -> Fixed:
        return quantize(x, self.width)

    def to_float(self, t: Fixed):
        return dequantize(t, np.float32)

    def positive(self, t: Fixed) -> np.ndarray:
        return t.mant > 0

    # kernels
    def spmm(self, site: str, adj: Fixed, h: Fixed, relu=False, mask=None) -> Fixed:
        return self._run(
            site, adj.exp + h.exp, lambda: _bound_bits(adj.mant, h.mant),
            lambda shift: self.backend.spmm(adj.mant, h.mant, shift, relu=relu, mask=mask))

    def gemm(self, site: str, form: str, x: Fixed, w: Fixed, relu=False, mask=None) -> Fixed:
        def bound():
            # Reduction vectors: rows of X for X·W and X·Wᵀ, columns of X for Xᵀ·G.
            a = x.mant if form != "xtg" else (
                sp.csr_array(x.mant.T) if sp.issparse(x.mant) else x.mant.T)
            return _bound_bits(a, w.mant)

        return self._run(
            site, x.exp + w.exp, bound,
            lambda shift: self.backend.gemm(form, x.mant, w.mant, shift, relu=relu, mask=mask))

    def _run(self, site: str, acc_exp: int, bound, execute) -> Fixed:
        bits = self.magnitude[site] - acc_exp if site in self.magnitude else bound()
        shift = max(0, bits - (self.width - 1))
        mant, stats = execute(shift)
        if stats.max_abs:
            self.magnitude[site] = stats.max_abs.bit_length() + acc_exp + self.headroom
        self.saturated += stats.saturated
        self.operations += 1
        return Fixed(np.asarray(mant, dtype=np.int64), acc_exp + shift, self.width)

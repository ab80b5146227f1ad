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


def _gemm_bound_bits(form: str, x: Fixed, w: Fixed) -> int:
    # reduction vectors: rows of X for X·W and X·Wᵀ, columns of X for Xᵀ·G
    a = x.mant if form != "xtg" else (
        sp.csr_array(x.mant.T) if sp.issparse(x.mant) else x.mant.T)
    return _bound_bits(a, w.mant)


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
            lambda shift: self.backend.spmm(adj.mant, h.mant, shift, relu=relu, mask=mask,
                                            site=site))

    def gemm(self, site: str, form: str, x: Fixed, w: Fixed, relu=False, mask=None) -> Fixed:
        return self._run(
            site, x.exp + w.exp, lambda: _gemm_bound_bits(form, x, w),
            lambda shift: self.backend.gemm(form, x.mant, w.mant, shift, relu=relu, mask=mask,
                                            site=site))

    def spmm_gemm(self, site: str, adj: Fixed, h: Fixed, gemm_site: str, form: str,
                  w: Fixed, relu=False, mask=None) -> tuple[Fixed, Fixed]:
        """An SpMM feeding a GEMM. The backend runs them as one pipelined pass once both
        shifts are known before the SpMM starts, i.e. once the GEMM's site has been
        seen (delayed scaling); its first execution needs the SpMM's output for its
        bound, so it runs the two kernels one after the other. Same results either way."""
        fused = getattr(self.backend, "spmm_gemm", None)
        if fused is None or gemm_site not in self.magnitude:
            a = self.spmm(site, adj, h)
            return a, self.gemm(gemm_site, form, a, w, relu=relu, mask=mask)
        exp1 = adj.exp + h.exp
        shift1 = self._shift(site, exp1, lambda: _bound_bits(adj.mant, h.mant))
        exp2 = exp1 + shift1 + w.exp
        shift2 = self._shift(gemm_site, exp2, None)
        return self._pair(
            site, exp1, shift1, gemm_site, exp2, shift2,
            fused(adj.mant, h.mant, shift1, form, w.mant, shift2, relu=relu, mask=mask,
                  site=f"{site}+{gemm_site}"))

    def gemm_spmm(self, site: str, form: str, x: Fixed, w: Fixed, spmm_site: str,
                  adj: Fixed, relu=False, mask=None) -> tuple[Fixed, Fixed]:
        """A GEMM whose rows feed an SpMM: pipelined on the backend once the SpMM's
        shift is known in advance (its site seen before), as :meth:`spmm_gemm`."""
        fused = getattr(self.backend, "gemm_spmm", None)
        if fused is None or spmm_site not in self.magnitude:
            t = self.gemm(site, form, x, w)
            return t, self.spmm(spmm_site, adj, t, relu=relu, mask=mask)
        exp1 = x.exp + w.exp
        shift1 = self._shift(site, exp1, lambda: _gemm_bound_bits(form, x, w))
        exp2 = adj.exp + exp1 + shift1
        shift2 = self._shift(spmm_site, exp2, None)
        return self._pair(
            site, exp1, shift1, spmm_site, exp2, shift2,
            fused(form, x.mant, w.mant, shift1, adj.mant, shift2, relu=relu, mask=mask,
                  site=f"{site}+{spmm_site}"))

    def spmm_and_gemm(self, site: str, adj: Fixed, h: Fixed, gemm_site: str, form: str,
                      x: Fixed, w: Fixed) -> tuple[Fixed, Fixed]:
        """Two independent kernels; both shifts are known up front, so a backend that
        can runs them at once (``spmm_and_gemm``)."""
        both = getattr(self.backend, "spmm_and_gemm", None)
        if both is None:
            return self.spmm(site, adj, h), self.gemm(gemm_site, form, x, w)
        exp1, exp2 = adj.exp + h.exp, x.exp + w.exp
        shift1 = self._shift(site, exp1, lambda: _bound_bits(adj.mant, h.mant))
        shift2 = self._shift(gemm_site, exp2, lambda: _gemm_bound_bits(form, x, w))
        return self._pair(
            site, exp1, shift1, gemm_site, exp2, shift2,
            both(adj.mant, h.mant, shift1, form, x.mant, w.mant, shift2,
                 site=f"{site}|{gemm_site}"))

    def _pair(self, site1, exp1, shift1, site2, exp2, shift2, outcome) -> tuple[Fixed, Fixed]:
        """Two kernels' results, ``outcome`` = (rows, stats, rows, stats), as tensors."""
        y1, st1, y2, st2 = outcome
        self._observe(site1, exp1, st1)
        self._observe(site2, exp2, st2)
        return (Fixed(np.asarray(y1, dtype=np.int64), exp1 + shift1, self.width),
                Fixed(np.asarray(y2, dtype=np.int64), exp2 + shift2, self.width))

    def _shift(self, site: str, acc_exp: int, bound) -> int:
        bits = self.magnitude[site] - acc_exp if site in self.magnitude else bound()
        return max(0, bits - (self.width - 1))

    def _observe(self, site: str, acc_exp: int, stats) -> None:
        if stats.max_abs:
            self.magnitude[site] = stats.max_abs.bit_length() + acc_exp + self.headroom
        self.saturated += stats.saturated
        self.operations += 1

    def _run(self, site: str, acc_exp: int, bound, execute) -> Fixed:
        shift = self._shift(site, acc_exp, bound)
        mant, stats = execute(shift)
        self._observe(site, acc_exp, stats)
        return Fixed(np.asarray(mant, dtype=np.int64), acc_exp + shift, self.width)

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

from mixgcn.golden.backend import Backend, PairResult, Stage
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
    """The ops interface of :class:`mixgcn.golden.gcn.GCN` in block floating point, on
    any :class:`~mixgcn.golden.backend.Backend`."""

    def __init__(self, backend: Backend, headroom: int = 1):
        if not isinstance(backend, Backend):
            raise TypeError(f"expected a Backend, got {backend!r}")
        self.backend = backend
        self.width = backend.fmt.width
        self.headroom = headroom
        self.magnitude: dict[str, int] = {}  # site -> log2 bound of |value| seen last
        self.saturated = 0
        self.operations = 0

    # host-side tensors
    def adjacency(self, adj: sp.csr_array) -> Fixed:
        return quantize(adj, self.width)

    def tensor(self, site: str, x, source: Fixed | None = None, rowwise: bool = False) -> Fixed:
        """``x`` quantised. ``source``: the kernel output ``x`` was computed from on the
        host (elementwise, or row by row with ``rowwise``), so the backend keeps the
        result where that output is."""
        t = quantize(x, self.width)
        if source is not None:
            self.backend.derive(t.mant, source.mant, rowwise=rowwise, site=site)
        return t

    def to_float(self, t: Fixed):
        return dequantize(t, np.float32)

    def positive(self, t: Fixed) -> np.ndarray:
        mask = t.mant > 0
        self.backend.derive(mask, t.mant)
        return mask

    # kernels
    def spmm(self, site: str, adj: Fixed, h: Fixed, relu=False, mask=None) -> Fixed:
        exp = adj.exp + h.exp
        stage = Stage(self._shift(site, exp, lambda: _bound_bits(adj.mant, h.mant)), relu, mask)
        return self._result(site, exp, stage,
                            self.backend.spmm(adj.mant, h.mant, stage, site=site))

    def gemm(self, site: str, form: str, x: Fixed, w: Fixed, relu=False, mask=None) -> Fixed:
        exp = x.exp + w.exp
        stage = Stage(self._shift(site, exp, lambda: _gemm_bound_bits(form, x, w)), relu, mask)
        return self._result(site, exp, stage,
                            self.backend.gemm(form, x.mant, w.mant, stage, site=site))

    def spmm_gemm(self, site: str, adj: Fixed, h: Fixed, gemm_site: str, form: str,
                  w: Fixed, relu=False, mask=None) -> tuple[Fixed, Fixed]:
        """An SpMM feeding a GEMM. The backend runs them as one pair once both shifts are
        known before the SpMM starts, i.e. once the GEMM's site has been seen (delayed
        scaling); its first execution needs the SpMM's output for its bound, so it runs
        the two kernels one after the other. Same results either way."""
        if gemm_site not in self.magnitude:
            a = self.spmm(site, adj, h)
            return a, self.gemm(gemm_site, form, a, w, relu=relu, mask=mask)
        exp1 = adj.exp + h.exp
        first = Stage(self._shift(site, exp1, lambda: _bound_bits(adj.mant, h.mant)))
        exp2 = exp1 + first.shift + w.exp
        second = Stage(self._shift(gemm_site, exp2, None), relu, mask)
        pair = self.backend.spmm_gemm(adj.mant, h.mant, form, w.mant, (first, second),
                                      sites=(site, gemm_site))
        return self._pair((site, gemm_site), (exp1, exp2), (first, second), pair)

    def gemm_spmm(self, site: str, form: str, x: Fixed, w: Fixed, spmm_site: str,
                  adj: Fixed, relu=False, mask=None) -> tuple[Fixed, Fixed]:
        """A GEMM whose rows feed an SpMM: one pair once the SpMM's shift is known in
        advance (its site seen before), as :meth:`spmm_gemm`."""
        if spmm_site not in self.magnitude:
            t = self.gemm(site, form, x, w)
            return t, self.spmm(spmm_site, adj, t, relu=relu, mask=mask)
        exp1 = x.exp + w.exp
        first = Stage(self._shift(site, exp1, lambda: _gemm_bound_bits(form, x, w)))
        exp2 = adj.exp + exp1 + first.shift
        second = Stage(self._shift(spmm_site, exp2, None), relu, mask)
        pair = self.backend.gemm_spmm(form, x.mant, w.mant, adj.mant, (first, second),
                                      sites=(site, spmm_site))
        return self._pair((site, spmm_site), (exp1, exp2), (first, second), pair)

    def spmm_and_gemm(self, site: str, adj: Fixed, h: Fixed, gemm_site: str, form: str,
                      x: Fixed, w: Fixed) -> tuple[Fixed, Fixed]:
        """Two independent kernels; both shifts are known up front, so the backend may
        run them at once."""
        exp1, exp2 = adj.exp + h.exp, x.exp + w.exp
        first = Stage(self._shift(site, exp1, lambda: _bound_bits(adj.mant, h.mant)))
        second = Stage(self._shift(gemm_site, exp2, lambda: _gemm_bound_bits(form, x, w)))
        pair = self.backend.spmm_and_gemm(adj.mant, h.mant, form, x.mant, w.mant,
                                          (first, second), sites=(site, gemm_site))
        return self._pair((site, gemm_site), (exp1, exp2), (first, second), pair)

    def _pair(self, sites, exps, stages, pair: PairResult) -> tuple[Fixed, Fixed]:
        return (self._result(sites[0], exps[0], stages[0], pair.first),
                self._result(sites[1], exps[1], stages[1], pair.second))

    def _shift(self, site: str, acc_exp: int, bound) -> int:
        bits = self.magnitude[site] - acc_exp if site in self.magnitude else bound()
        return max(0, bits - (self.width - 1))

    def _result(self, site: str, acc_exp: int, stage: Stage, result) -> Fixed:
        """Record what the output stage saw (the next execution's shift) and wrap the
        output as a tensor at the accumulator's exponent plus the shift."""
        if result.stats.max_abs:
            self.magnitude[site] = result.stats.max_abs.bit_length() + acc_exp + self.headroom
        self.saturated += result.stats.saturated
        self.operations += 1
        return Fixed(np.asarray(result.rows, dtype=np.int64), acc_exp + stage.shift, self.width)

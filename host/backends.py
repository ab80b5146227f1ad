"""Backends: what executes the integer kernels (SpMM, GEMM + output stage).

Every backend takes mantissas and an output-stage setting and returns the output
mantissas plus the stage's :class:`~mixgcn.golden.fixed.OutputStats`; exponents and
everything in float stay on the host (:mod:`mixgcn.host.precision`). ``golden`` is the
numpy functional model; the RTL backend (simulated chip) implements the same calls.
``site`` names the operation (``L1.bwd.agg``) for a backend's accounting; it never
changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mixgcn.golden import fixed

__all__ = ["BACKENDS", "GoldenBackend", "NumberFormat"]


@dataclass(frozen=True)
class NumberFormat:
    """Data and accumulator widths of the engines (DESIGN §4)."""

    width: int = 16
    acc_width: int = 48

    def __post_init__(self):
        fixed.mant_range(self.width)  # validates the width
        if not (isinstance(self.acc_width, int) and 2 * self.width <= self.acc_width <= 64):
            raise ValueError(
                f"acc_width must be an integer in {2 * self.width}..64, got {self.acc_width!r}"
            )

    def check_reduction(self, length: int, what: str) -> None:
        try:
            fixed.check_accumulator(self.width, self.acc_width, max(int(length), 1))
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None


class GoldenBackend:
    """The bit-exact functional model of the engines (pure numpy)."""

    name = "golden"

    def __init__(self, fmt: NumberFormat = NumberFormat()):
        self.fmt = fmt

    def spmm(self, s: sp.csr_array, x: np.ndarray, shift: int, relu=False, mask=None,
             site=None):
        row_nnz = np.diff(s.indptr)
        self.fmt.check_reduction(row_nnz.max() if row_nnz.size else 0, "SpMM row")
        return fixed.output_stage(fixed.spmm(s, x), shift, self.fmt.width, relu, mask)

    def spmm_gemm(self, s, x, shift: int, form: str, w, shift2: int, relu=False, mask=None,
                  site=None):
        """``A = S·X`` (no ReLU, no mask) feeding ``A·W`` / ``A·Wᵀ`` (``relu``, ``mask``):
        the chip's fused pass, here the two kernels in turn. Returns (A, stats of A,
        product, stats of the product)."""
        a, st1 = self.spmm(s, x, shift)
        z, st2 = self.gemm(form, a, w, shift2, relu=relu, mask=mask)
        return a, st1, z, st2

    def gemm_spmm(self, form: str, x, w, shift: int, s, shift2: int, relu=False, mask=None,
                  site=None):
        """``T = X·W`` / ``X·Wᵀ`` (no ReLU, no mask) feeding ``S·T`` (``relu``, ``mask``):
        the chip's other fused pass, here in turn. Returns (T, its stats, S·T, stats)."""
        t, st1 = self.gemm(form, x, w, shift)
        z, st2 = self.spmm(s, t, shift2, relu=relu, mask=mask)
        return t, st1, z, st2

    def spmm_and_gemm(self, s, h, shift: int, form: str, x, w, shift2: int, site=None):
        """An SpMM and an unrelated GEMM (at once on a chip). Returns (SpMM result, its
        stats, GEMM result, its stats)."""
        y1, st1 = self.spmm(s, h, shift)
        y2, st2 = self.gemm(form, x, w, shift2)
        return y1, st1, y2, st2

    def gemm(self, form: str, x, w: np.ndarray, shift: int, relu=False, mask=None,
             site=None):
        k = x.shape[0] if form == "xtg" else x.shape[1]
        self.fmt.check_reduction(k, f"GEMM {form} reduction")
        return fixed.output_stage(fixed.gemm(form, x, w), shift, self.fmt.width, relu, mask)


BACKENDS = {"golden": GoldenBackend}

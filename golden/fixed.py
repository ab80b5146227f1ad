"""Bit-exact fixed-point operators: what the RTL computes, as plain integer numpy.

Number format (docs/numbers.md): a tensor is *block floating point* — signed integers
("mantissas") of ``width`` bits sharing one power-of-two exponent, value =
``mant * 2**exp``. ``width`` is a generator parameter (default 16).

Kernel semantics, identical in every engine:

1. **Products and accumulation are exact.** ``acc = Σ_k a_k · b_k`` over integers;
   the accumulator has ``acc_width`` bits, which :func:`required_acc_width` sizes so
   that no reduction of up to ``max_reduction`` terms can overflow. The result is
   therefore independent of the order of additions, and of which engine or how many
   lanes computed it. The accumulator's exponent is ``exp_a + exp_b``.
2. **The output stage** (:func:`output_stage`) maps each accumulator to ``width`` bits
   once, in this order:

   a. arithmetic right shift by ``shift`` (``0 <= shift``) with **round half to even**:
      ``q = floor(acc / 2**shift)``; ``r = acc - q * 2**shift``; add 1 when
      ``r > 2**(shift-1)``, or when ``r == 2**(shift-1)`` and ``q`` is odd
      (``shift == 0``: ``q = acc``);
   b. optional **ReLU**: ``q = max(q, 0)``;
   c. **saturate** to ``[-2**(width-1), 2**(width-1) - 1]``;
   d. optional **ReLU' mask**: ``q = 0`` where the mask bit is 0 (the mask comes
      from stored activations: bit = activation > 0).

   The result's exponent is ``exp_acc + shift``. The stage also reports
   :class:`OutputStats`: the largest ``|acc|`` it saw (the host's exponent policy
   reads it) and how many outputs saturated.

The matrix products use float64 BLAS when every partial sum is provably an integer
below 2**53 (then float64 addition is exact, in any order); otherwise int64, and past
int64 a clear error. Either way the result is the exact integer product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Fixed",
    "OutputStats",
    "check_accumulator",
    "choose_exponent",
    "dequantize",
    "gemm",
    "mant_range",
    "output_stage",
    "product_bound",
    "quantize",
    "required_acc_width",
    "round_shift",
    "spmm",
]

GEMM_FORMS = ("xw", "xwt", "xtg")


def mant_range(width: int) -> tuple[int, int]:
    """Smallest and largest mantissa of a signed ``width``-bit integer."""
    if not (isinstance(width, int) and 2 <= width <= 32):
        raise ValueError(f"data width must be an integer in 2..32, got {width!r}")
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def required_acc_width(width: int, max_reduction: int) -> int:
    """Fewest signed accumulator bits that hold any sum of ``max_reduction`` products
    of two ``width``-bit integers. The extreme is ``max_reduction · (-2**(width-1))²``."""
    lo, _ = mant_range(width)
    if not (isinstance(max_reduction, int) and max_reduction >= 1):
        raise ValueError(f"max_reduction must be a positive integer, got {max_reduction!r}")
    extreme = max_reduction * lo * lo
    return extreme.bit_length() + 1  # + sign bit


def check_accumulator(width: int, acc_width: int, reduction: int) -> None:
    """Raise ``ValueError`` when ``acc_width`` bits could overflow on ``reduction`` terms."""
    need = required_acc_width(width, reduction)
    if acc_width < need:
        raise ValueError(
            f"accumulator of {acc_width} bits can overflow on a reduction of {reduction} "
            f"products of {width}-bit values: it needs at least {need} bits"
        )


@dataclass(frozen=True, eq=False)
class Fixed:
    """A block-floating-point tensor: ``value = mant * 2**exp``.

    ``mant`` is int64 (dense ndarray, or a CSR array for sparse operands) holding
    ``width``-bit signed values.
    """

    mant: np.ndarray | sp.csr_array
    exp: int
    width: int

    def __post_init__(self):
        lo, hi = mant_range(self.width)
        data = self.mant.data if sp.issparse(self.mant) else self.mant
        if data.dtype != np.int64:
            raise TypeError(f"Fixed mantissas must be int64, got {data.dtype}")
        if data.size and (data.min() < lo or data.max() > hi):
            raise ValueError(
                f"mantissa {int(data.min() if data.min() < lo else data.max())} does not "
                f"fit {self.width} bits"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        return self.mant.shape

    def to_float(self, dtype=np.float32):
        return dequantize(self, dtype)


def choose_exponent(max_abs: float, width: int) -> int:
    """Smallest exponent at which ``max_abs`` rounds to a representable mantissa."""
    _, hi = mant_range(width)
    if not math.isfinite(max_abs):
        raise ValueError(f"cannot quantise a non-finite value ({max_abs})")
    if max_abs == 0:
        return 0
    exp = math.ceil(math.log2(max_abs / hi))
    # log2 may land one off at exact powers of two; settle it with exact arithmetic.
    while round(math.ldexp(max_abs, -exp)) > hi:
        exp += 1
    while exp > -1074 and round(math.ldexp(max_abs, -(exp - 1))) <= hi:
        exp -= 1
    return exp


def quantize(x, width: int, exp: int | None = None) -> Fixed:
    """Round a float array (dense or CSR) to ``width``-bit mantissas at ``exp``
    (default: the tightest exponent for ``max |x|``): round half to even, saturate.
    This is host arithmetic (the chip never sees floats); it is deterministic."""
    lo, hi = mant_range(width)
    if sp.issparse(x):
        x = sp.csr_array(x)
        data = np.asarray(x.data, dtype=np.float64)
    else:
        data = np.asarray(x, dtype=np.float64)
    if data.size and not np.all(np.isfinite(data)):
        raise ValueError("cannot quantise a tensor holding NaN or inf")
    max_abs = float(np.max(np.abs(data))) if data.size else 0.0
    if exp is None:
        exp = choose_exponent(max_abs, width)
    mant = np.clip(np.rint(np.ldexp(data, -exp)), lo, hi).astype(np.int64)
    if sp.issparse(x):
        out = sp.csr_array((mant, x.indices.copy(), x.indptr.copy()), shape=x.shape)
        out.eliminate_zeros()
        return Fixed(out, exp, width)
    return Fixed(mant, exp, width)


def dequantize(t: Fixed, dtype=np.float32):
    """Exact value of ``t`` as floats (dense, or CSR for sparse mantissas)."""
    if sp.issparse(t.mant):
        return sp.csr_array(
            (np.ldexp(t.mant.data.astype(np.float64), t.exp).astype(dtype),
             t.mant.indices, t.mant.indptr), shape=t.mant.shape)
    return np.ldexp(t.mant.astype(np.float64), t.exp).astype(dtype)


# ------------------------------------------------------------------------- products


def _max_abs(a) -> int:
    data = a.data if sp.issparse(a) else a
    return int(np.max(np.abs(data))) if data.size else 0


def _max_row_l1(a) -> int:
    """max_i Σ_k |a[i, k]| — a bound on how far a row's partial sums can stray."""
    if sp.issparse(a):
        absa = abs(a)
        return int(absa.sum(axis=1).max()) if a.shape[0] and a.nnz else 0
    return int(np.abs(a).sum(axis=1).max()) if a.size else 0


def product_bound(a, b) -> int:
    """``max_i Σ_k |a_ik| · max |b|``: no partial sum of ``a @ b`` can exceed it."""
    return _max_row_l1(a) * _max_abs(b)


def _exact_matmul(a, b) -> np.ndarray:
    """Exact integer ``a @ b`` (either dense or CSR), as a dense int64 array."""
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: {a.shape} @ {b.shape}")
    # SciPy may sum repeated entries of a CSR in place: never touch the caller's
    a = a.copy() if sp.issparse(a) else a
    b = b.copy() if sp.issparse(b) else b
    bound = product_bound(a, b)
    if bound >= 2**63:
        raise OverflowError(f"partial sums may reach {bound}, beyond int64")
    dtype = np.float64 if bound < 2**53 else np.int64
    out = a.astype(dtype) @ b.astype(dtype)
    return (out.toarray() if sp.issparse(out) else np.asarray(out)).astype(np.int64)


def _mant(t) -> np.ndarray | sp.csr_array:
    return t.mant if isinstance(t, Fixed) else t


def spmm(s, x) -> np.ndarray:
    """Accumulators of ``Y = S · X``: ``S`` a CSR matrix of mantissas, ``X`` mantissas
    (dense, or CSR for sparse features; ``Fixed`` or int arrays). Exact dense int64,
    exponent ``exp_S + exp_X``."""
    s, x = _mant(s), _mant(x)
    if not sp.issparse(s):
        raise TypeError("spmm expects S as a scipy CSR matrix")
    return _exact_matmul(s, x)


def gemm(form: str, x, w) -> np.ndarray:
    """Accumulators of a dense-engine product, exact int64.

    - ``"xw"``:  ``Y = X · W``   (X ``[N, K]``, W ``[K, M]``)
    - ``"xwt"``: ``Y = X · Wᵀ``  (X ``[N, K]``, W ``[M, K]``)
    - ``"xtg"``: ``Y = Xᵀ · G``  (X ``[N, K]``, G ``[N, M]``; reduces over the N rows)

    ``X`` may be CSR (sparse input features): the same integers come out.
    """
    x, w = _mant(x), _mant(w)
    if form == "xw":
        return _exact_matmul(x, w)
    if form == "xwt":
        return _exact_matmul(x, np.asarray(w).T)
    if form == "xtg":
        xt = sp.csr_array(x.T) if sp.issparse(x) else np.asarray(x).T
        return _exact_matmul(xt, w)
    raise ValueError(f"unknown GEMM form {form!r}: expected one of {GEMM_FORMS}")


# --------------------------------------------------------------------- output stage


@dataclass(frozen=True)
class OutputStats:
    """What the output stage observed over one operation."""

    max_abs: int  # largest |acc| before shifting
    saturated: int  # outputs clipped to the width's range


def round_shift(acc: np.ndarray, shift: int) -> np.ndarray:
    """``acc / 2**shift`` rounded half to even (exact integer arithmetic)."""
    acc = np.asarray(acc, dtype=np.int64)
    if not (isinstance(shift, int | np.integer) and 0 <= shift <= 62):
        raise ValueError(f"shift must be an integer in 0..62, got {shift!r}")
    if shift == 0:
        return acc.copy()
    q = acc >> shift
    r = acc & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    return q + ((r > half) | ((r == half) & ((q & 1) == 1)))


def output_stage(
    acc: np.ndarray,
    shift: int,
    width: int,
    relu: bool = False,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, OutputStats]:
    """Requantise accumulators to ``width`` bits (module docstring, step 2)."""
    lo, hi = mant_range(width)
    acc = np.asarray(acc, dtype=np.int64)
    q = round_shift(acc, shift)
    if relu:
        q = np.maximum(q, 0)
    saturated = int(np.count_nonzero((q < lo) | (q > hi)))
    q = np.clip(q, lo, hi)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != q.shape:
            raise ValueError(f"mask shape {mask.shape} differs from output shape {q.shape}")
        q = np.where(mask.astype(bool), q, 0)
    max_abs = int(np.max(np.abs(acc))) if acc.size else 0
    return q, OutputStats(max_abs=max_abs, saturated=saturated)

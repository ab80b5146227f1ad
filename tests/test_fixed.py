"""The fixed-point operators the RTL is compared with, against plain Python integers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.golden import fixed
from mixgcn.golden.fixed import Fixed


def _py_round_shift(a: int, s: int) -> int:
    """Round half to even of a / 2**s in Python's unbounded integers."""
    if s == 0:
        return a
    q, r = divmod(a, 1 << s)  # floor division, r >= 0
    half = 1 << (s - 1)
    return q + (1 if r > half or (r == half and q % 2) else 0)


@pytest.mark.parametrize(("acc", "shift", "want"), [
    (5, 1, 2), (7, 1, 4), (-5, 1, -2), (-7, 1, -4), (6, 2, 2), (10, 2, 2), (-6, 2, -2),
    (-10, 2, -2), (3, 2, 1), (-3, 2, -1), (1, 1, 0), (-1, 1, 0), (0, 5, 0), (9, 0, 9),
])
def test_round_half_to_even_table(acc, shift, want):
    assert fixed.round_shift(np.array([acc]), shift)[0] == want


def test_round_shift_matches_python_integers():
    rng = np.random.default_rng(0)
    acc = rng.integers(-(2**47), 2**47, size=4000)
    acc[:8] = [0, 1, -1, 2**47 - 1, -(2**47), 3, -3, 2**46]
    for s in (0, 1, 2, 7, 15, 31, 46):
        got = fixed.round_shift(acc, s)
        assert got.tolist() == [_py_round_shift(int(a), s) for a in acc]


def test_output_stage_order_and_stats():
    acc = np.array([[70000, -70000, 3, -3], [-(2**20), 2**20, 0, 5]])
    q, st = fixed.output_stage(acc, 1, 16)
    assert q.tolist() == [[32767, -32768, 2, -2], [-32768, 32767, 0, 2]]
    assert st == fixed.OutputStats(max_abs=2**20, saturated=4)
    q, st = fixed.output_stage(acc, 1, 16, relu=True)
    assert q.tolist() == [[32767, 0, 2, 0], [0, 32767, 0, 2]]
    assert st.saturated == 2  # ReLU came first: negatives are not counted as clipped
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 0]], bool)
    q, _ = fixed.output_stage(acc, 1, 16, relu=True, mask=mask)
    assert q.tolist() == [[32767, 0, 0, 0], [0, 32767, 0, 0]]
    with pytest.raises(ValueError, match="mask shape"):
        fixed.output_stage(acc, 1, 16, mask=mask[:1])
    with pytest.raises(ValueError, match="shift must be an integer in 0..62, got -1"):
        fixed.output_stage(acc, -1, 16)


def test_output_stage_most_negative_and_rounding_into_saturation():
    lo, hi = fixed.mant_range(16)
    # hi + 0.5 rounds to even (hi + 1), which then saturates back to hi
    q, st = fixed.output_stage(np.array([2 * hi + 1, 2 * lo, 2 * lo - 1]), 1, 16)
    assert q.tolist() == [hi, lo, lo]
    # only the first saturated: (2*lo - 1) / 2 = lo - 0.5 rounds to lo itself (even)
    assert st.saturated == 1


def test_required_acc_width_is_tight():
    for width in (4, 8, 16):
        for k in (1, 2, 3, 1000, 2708, 65536):
            a = fixed.required_acc_width(width, k)
            lo, _ = fixed.mant_range(width)
            extreme = k * lo * lo
            assert extreme <= 2 ** (a - 1) - 1  # fits a signed a-bit accumulator
            assert extreme > 2 ** (a - 2) - 1  # and a - 1 bits would not do
    assert fixed.required_acc_width(16, 2708) == 43
    with pytest.raises(ValueError, match="48 bits can overflow on a reduction of 131072"):
        fixed.check_accumulator(16, 48, 131072)
    fixed.check_accumulator(16, 48, 65536)


@pytest.mark.parametrize("max_abs", [1.0, 0.75, 2.0**-20, 3.0e5, 32767.0, 32767.5, 1e-300])
def test_choose_exponent_is_tightest(max_abs):
    e = fixed.choose_exponent(max_abs, 16)
    assert round(np.ldexp(max_abs, -e)) <= 32767
    assert round(np.ldexp(max_abs, -(e - 1))) > 32767


def test_quantize_round_trip_and_errors():
    x = np.array([[1.0, -0.5, 0.25], [0.0, 1e-9, -1.0]])
    t = fixed.quantize(x, 16)
    assert t.exp == -14 and t.mant[0].tolist() == [16384, -8192, 4096]
    assert np.array_equal(t.to_float(np.float64), np.round(x * 2**14) / 2**14)
    s = fixed.quantize(sp.csr_array(x), 16)
    assert sp.issparse(s.mant) and np.array_equal(s.mant.toarray(), t.mant)
    with pytest.raises(ValueError, match="NaN or inf"):
        fixed.quantize(np.array([1.0, np.nan]), 16)
    with pytest.raises(ValueError, match="does not fit 16 bits"):
        Fixed(np.array([40000]), 0, 16)
    with pytest.raises(ValueError, match="width must be an integer in 2..32, got 40"):
        fixed.quantize(x, 40)


def _py_matmul(a, b):
    return [[sum(int(a[i][k]) * int(b[k][j]) for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


@pytest.mark.parametrize("seed", range(4))
def test_gemm_forms_are_exact(seed):
    rng = np.random.default_rng(seed)
    lo, hi = fixed.mant_range(16)
    n, k, m = rng.integers(1, 9, size=3)
    x = rng.integers(lo, hi + 1, size=(n, k))
    w = rng.integers(lo, hi + 1, size=(k, m))
    g = rng.integers(lo, hi + 1, size=(n, m))
    x[0, 0] = lo  # the most negative value, squared, is the extreme product
    assert fixed.gemm("xw", x, w).tolist() == _py_matmul(x.tolist(), w.tolist())
    assert fixed.gemm("xwt", x, w.T.copy()).tolist() == _py_matmul(x.tolist(), w.tolist())
    assert fixed.gemm("xtg", x, g).tolist() == _py_matmul(x.T.tolist(), g.tolist())
    xs = sp.csr_array(np.where(rng.random(x.shape) < 0.5, x, 0))
    assert np.array_equal(fixed.gemm("xw", xs, w), fixed.gemm("xw", xs.toarray(), w))
    assert np.array_equal(fixed.gemm("xtg", xs, g), fixed.gemm("xtg", xs.toarray(), g))
    with pytest.raises(ValueError, match="unknown GEMM form 'xx'"):
        fixed.gemm("xx", x, w)


def test_int64_path_beyond_float64_exactness():
    """Partial sums past 2**53 leave float64 behind; the int64 path stays exact."""
    lo, _ = fixed.mant_range(16)
    k = 2**24
    x = np.full((1, k), lo, np.int64)
    w = np.full((k, 1), lo, np.int64)
    w[-1, 0] = lo + 1  # an odd total that float64 could not hold
    want = (k - 1) * lo * lo + lo * (lo + 1)
    assert want > 2**53
    assert fixed.gemm("xw", x, w)[0, 0] == want
    with pytest.raises(OverflowError, match="beyond int64"):
        fixed.gemm("xw", np.full((1, 4), 2**31), np.full((4, 1), 2**31))


def test_spmm_exact_with_repeated_columns_and_empty_rows():
    rng = np.random.default_rng(7)
    lo, hi = fixed.mant_range(16)
    cols = np.array([1, 1, 3, 0, 3])  # (0, 1) twice: CSR keeps both entries
    vals = np.array([lo, lo, hi, 5, -7])
    s = sp.csr_array((vals, cols, np.array([0, 3, 3, 5])), shape=(3, 4))
    assert s.nnz == 5  # not summed away
    x = rng.integers(lo, hi + 1, size=(4, 3))
    want = _py_matmul(s.toarray().tolist(), x.tolist())
    assert fixed.spmm(s, x).tolist() == want
    assert fixed.spmm(s, x)[1].tolist() == [0, 0, 0]


def test_spmm_leaves_repeated_entries_of_the_input_alone():
    s = sp.csr_array((np.array([30000, 30000]), np.array([1, 1]), np.array([0, 2])),
                     shape=(1, 2))
    fixed.spmm(s, np.array([[1], [2]]))
    assert s.data.tolist() == [30000, 30000]  # not summed into 60000 in place

"""Column windows (host/tiling.py): every non-zero of S in exactly one window of its
block, every window within the buffer, every block that needs partial sums within
them, and the windows' products summing to S · X exactly."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.golden import fixed
from mixgcn.golden.datasets import make_synthetic
from mixgcn.golden.graph import normalized_adjacency
from mixgcn.host.tiling import plan_windows


def _adjacency(nodes: int, seed: int = 0) -> sp.csr_array:
    ds = make_synthetic(nodes=nodes, degree=6, seed=seed)
    return fixed.quantize(normalized_adjacency(ds.edge_index, ds.num_nodes), 16).mant


def _check(s: sp.csr_array, plan, buffer_rows: int, partial_rows: int) -> None:
    n, k = s.shape
    x = np.random.default_rng(1).integers(-3000, 3000, (k, 3))
    out = np.zeros((n, 3), dtype=np.int64)
    nnz = 0
    assert [b.start for b in plan.blocks] == list(np.cumsum([0] + [b.rows for b in
                                                                   plan.blocks[:-1]]))
    assert sum(b.rows for b in plan.blocks) == n
    for b in plan.blocks:
        assert len(b.windows) == 1 or b.rows <= partial_rows
        for w in b.windows:
            assert 1 <= w.rows <= buffer_rows and 0 <= w.lo and w.lo + w.rows <= k
            assert w.s.shape == (b.rows, w.rows)
            rows = np.arange(w.lo, w.lo + w.rows) if w.x_rows is None else w.x_rows
            assert len(rows) == w.rows
            nnz += w.s.nnz
            out[b.start:b.start + b.rows] += fixed.spmm(w.s, x[rows])
    assert nnz == s.nnz  # every non-zero in exactly one window
    assert np.array_equal(out, fixed.spmm(s, x))


def test_a_matrix_that_fits_is_one_window():
    s = _adjacency(300)
    plan = plan_windows(s, buffer_rows=300, partial_rows=0)
    assert not plan.tiled and plan.loads == 1 and plan.rows_loaded == 300
    assert plan.blocks[0].windows[0].s is s


@pytest.mark.parametrize(("buffer_rows", "partial_rows"), [(64, 16), (200, 96), (299, 1)])
def test_windows_cover_every_non_zero_once_and_sum_exactly(buffer_rows, partial_rows):
    s = _adjacency(600, seed=buffer_rows)
    plan = plan_windows(s, buffer_rows=buffer_rows, partial_rows=partial_rows)
    assert plan.tiled and plan.loads > 600 // buffer_rows
    _check(s, plan, buffer_rows, partial_rows)


def test_rows_close_to_their_columns_need_no_partial_sums():
    # a band matrix: each block of rows gathers from one window, however many rows
    n = 1000
    band = sp.csr_array(sp.diags([1, 2, 3], [-2, 0, 2], shape=(n, n), dtype=np.int64))
    plan = plan_windows(band, buffer_rows=100, partial_rows=8)
    assert all(len(b.windows) == 1 for b in plan.blocks)
    assert max(b.rows for b in plan.blocks) > 8  # longer than the partial sums
    _check(band, plan, 100, 8)


def test_a_block_loads_only_the_rows_of_x_it_uses():
    # rows 0..9 use columns 0..4 and 995..999 only (rows 10, 11 none): one window of
    # those ten rows of X, gathered
    n, k = 12, 1000
    dense = np.zeros((n, k), dtype=np.int64)
    dense[:10, :5] = 1
    dense[:10, -5:] = 2
    s = sp.csr_array(dense)
    plan = plan_windows(s, buffer_rows=256, partial_rows=10)
    (block,) = plan.blocks
    assert [w.x_rows.tolist() for w in block.windows] == [[0, 1, 2, 3, 4, 995, 996, 997,
                                                           998, 999]]
    _check(s, plan, 256, 10)


def test_rows_of_nothing_load_one_row():
    s = sp.csr_array((5, 1000), dtype=np.int64)
    plan = plan_windows(s, buffer_rows=256, partial_rows=4)
    assert plan.rows_loaded == 1
    _check(s, plan, 256, 4)


def test_without_partial_sums_a_wide_matrix_is_refused_naming_the_limits():
    s = _adjacency(300)
    with pytest.raises(ValueError, match=r"gathers from 300 rows of X; the sparse engine's "
                       r"buffer holds 100 \(SAEConfig.max_nodes\) .*partial_rows=0"):
        plan_windows(s, buffer_rows=100, partial_rows=0)


def test_cora_on_the_tiny_chip_runs_in_windows(cora):
    from mixgcn.gen.config import CHIP_PRESETS

    sae = CHIP_PRESETS["tiny"].sae
    s = fixed.quantize(normalized_adjacency(cora.edge_index, cora.num_nodes), 16).mant
    plan = plan_windows(s, buffer_rows=sae.max_nodes, partial_rows=sae.partial_rows)
    assert plan.tiled
    _check(s, plan, sae.max_nodes, sae.partial_rows)

"""Node reordering: a renumbering that keeps the graph, the model and its function."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from mixgcn.golden.datasets import Dataset, make_synthetic
from mixgcn.golden.gcn import GCN, FloatOps, GCNConfig
from mixgcn.golden.graph import normalized_adjacency
from mixgcn.golden.reorder import bandwidth, node_order, reorder, trailing_lag
from mixgcn.host.train import normalize_features, train


def _path(n):
    """A path graph numbered badly: 0, n-1, 1, n-2, ... are neighbours."""
    walk = np.array([i // 2 if i % 2 == 0 else n - 1 - i // 2 for i in range(n)])
    src, dst = walk[:-1], walk[1:]
    ei = np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)
    ei = ei[:, np.lexsort((ei[1], ei[0]))]
    z = np.zeros(n, dtype=bool)
    return Dataset("path", ei, sp.csr_array(np.eye(n, dtype=np.float32)),
                   np.arange(n) % 3, z | (np.arange(n) < 3), z, z)


def test_rcm_shrinks_a_path_to_bandwidth_one():
    d = _path(40)
    assert bandwidth(d) == 39 and trailing_lag(d) == 39
    r = reorder(d, node_order(d, "rcm"))
    assert bandwidth(r) == 1 and trailing_lag(r) == 1
    # the same graph: degrees and label counts are permuted, not changed
    assert sorted(np.bincount(r.edge_index[0])) == sorted(np.bincount(d.edge_index[0]))
    assert np.array_equal(np.sort(r.labels), np.sort(d.labels))
    assert np.array_equal(r.edge_index, r.edge_index[:, np.lexsort(r.edge_index[::-1])])


def test_reordered_gcn_computes_the_same_function():
    d = make_synthetic(nodes=120, features=30, seed=4)
    perm = node_order(d, "rcm")
    r = reorder(d, perm)
    cfg = GCNConfig()
    outs = []
    for ds in (d, r):
        model = GCN(cfg, ds.num_features, ds.num_classes, np.random.default_rng(0), np.float64)
        adj = normalized_adjacency(ds.edge_index, ds.num_nodes)
        logits, _ = model.forward(FloatOps(np.float64), adj,
                                  normalize_features(ds.features).astype(np.float64), None)
        outs.append(logits)
    np.testing.assert_allclose(outs[1], outs[0][perm], rtol=1e-12, atol=1e-12)


def test_training_reports_the_ordering():
    d = make_synthetic(nodes=150, seed=2)
    r = train(d, GCNConfig(epochs=2), reorder="rcm")
    assert r["reorder"] == "rcm" and r["adjacency_bandwidth"] < bandwidth(d)


def test_metis_numbers_parts_together_and_cuts_the_rows_windows_load():
    """Two dense communities with their nodes interleaved: the metis order puts each
    community's nodes together, so blocks of rows use fewer rows of X — the rows
    column windows load (host/tiling.py)."""
    from mixgcn.golden import fixed
    from mixgcn.golden.reorder import METIS_PART_NODES
    from mixgcn.host.tiling import plan_windows

    n = 2 * METIS_PART_NODES
    rng = np.random.default_rng(0)
    side = np.arange(n) % 2  # community of each node: interleaved
    src = rng.integers(0, n, 20 * n)
    dst = src + 2 * rng.integers(-60, 60, src.size)  # the same community, nearby
    keep = (dst >= 0) & (dst < n) & (dst != src)
    src, dst = src[keep], dst[keep]
    ei = np.unique(np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1),
                   axis=1)
    z = np.zeros(n, dtype=bool)
    d = Dataset("two", ei, sp.csr_array(np.eye(n, dtype=np.float32)), side, z, z, z)
    perm = node_order(d, "metis")
    assert sorted(perm.tolist()) == list(range(n))
    loaded = {}
    for order in ("none", "metis"):
        r = reorder(d, node_order(d, order))
        s = fixed.quantize(normalized_adjacency(r.edge_index, n), 16).mant
        loaded[order] = plan_windows(s, buffer_rows=256, partial_rows=128).rows_loaded
    assert loaded["metis"] < 0.8 * loaded["none"], loaded


def test_bad_orderings_are_refused():
    d = make_synthetic(nodes=40, seed=1)
    with pytest.raises(ValueError, match="unknown node ordering 'nd'"):
        node_order(d, "nd")
    with pytest.raises(ValueError, match="permutation of 40 nodes"):
        reorder(d, np.zeros(40, dtype=int))

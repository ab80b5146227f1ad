"""Â = D^-1/2 (A + I) D^-1/2 against an independent dense computation."""

import numpy as np

from mixgcn.golden.graph import normalized_adjacency


def _dense_reference(edges, n):
    """The PyG gcn_norm recipe, written densely: fold duplicates, add I, scale."""
    a = np.zeros((n, n))
    for i, j in edges.T:
        if i != j:
            a[i, j] = 1.0
    a += np.eye(n)
    d = a.sum(axis=1)
    return a / np.sqrt(np.outer(d, d))


def test_matches_dense_reference_with_loops_duplicates_and_isolated_nodes():
    edges = np.array([[0, 1, 1, 2, 2, 3, 0], [1, 0, 2, 1, 2, 0, 3]])  # 2-2 loop, node 4 alone
    a = normalized_adjacency(edges, 5)
    assert np.allclose(a.toarray(), _dense_reference(edges, 5), rtol=0, atol=1e-15)
    assert a[4, 4] == 1.0  # degree 0: only the self-loop, no division by zero
    assert a.has_sorted_indices


def test_random_graph_symmetric_and_row_structure():
    rng = np.random.default_rng(5)
    n = 60
    e = rng.integers(0, n, size=(2, 300))
    e = np.concatenate([e, e[::-1]], axis=1)
    a = normalized_adjacency(e, n)
    assert np.allclose(a.toarray(), _dense_reference(e, n), atol=1e-15)
    assert abs(a - a.T).max() < 1e-15
    # the eigenvalues of Â lie in (-1, 1]
    w = np.linalg.eigvalsh(a.toarray())
    assert w.max() <= 1 + 1e-12 and w.min() > -1


def test_cora_adjacency(cora):
    a = normalized_adjacency(cora.edge_index, cora.num_nodes)
    assert a.nnz == 10556 + 2708
    assert np.allclose(a.diagonal(), 1.0 / (np.bincount(cora.edge_index[0]) + 1))

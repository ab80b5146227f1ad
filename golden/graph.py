"""Graph operators of the GCN: the normalised adjacency ``Â = D^-1/2 (A + I) D^-1/2``."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["metis_parts", "normalized_adjacency"]


def normalized_adjacency(
    edge_index: np.ndarray, num_nodes: int, dtype: type = np.float64
) -> sp.csr_array:
    """``Â = D^-1/2 (A + I) D^-1/2`` as CSR with sorted column indices.

    ``edge_index`` is ``[2, E]`` (row = target i, column = source j of ``Â[i, j]``);
    existing self-loops and duplicate edges are folded to weight 1 before ``I`` is
    added, so every diagonal entry is exactly ``1 / deg_i`` with ``deg_i`` counting the
    self-loop. A node of degree 0 therefore gets ``Â[i, i] = 1``: no division by zero.
    The GCN's backward pass uses ``Âᵀ = Â``: give both directions of every edge (the
    dataset loaders do).
    """
    edge_index = np.asarray(edge_index, dtype=np.int64)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must be [2, E], got shape {edge_index.shape}")
    src, dst = edge_index
    off = src != dst
    loops = np.arange(num_nodes, dtype=np.int64)
    rows = np.concatenate([src[off], loops])
    cols = np.concatenate([dst[off], loops])
    a = sp.csr_array(
        (np.ones(rows.size, dtype=np.float64), (rows, cols)), shape=(num_nodes, num_nodes)
    )
    a.sum_duplicates()
    a.data[:] = 1.0
    deg = np.asarray(a.sum(axis=1)).ravel()
    d = 1.0 / np.sqrt(deg)
    a = sp.csr_array(sp.diags_array(d) @ a @ sp.diags_array(d))
    a.sort_indices()
    return a.astype(dtype)


def metis_parts(a: sp.csr_array, parts: int) -> np.ndarray:
    """The part (0 .. parts-1) METIS (``pymetis``) puts each node of the graph ``a`` in,
    with few edges between parts; every part gets at least one node. A fixed seed: the
    same parts on every run and every MPI rank."""
    if parts == 1:
        return np.zeros(a.shape[0], dtype=np.int64)
    try:
        import pymetis
    except ImportError:
        raise ValueError("METIS (--partitioner metis, --reorder metis) needs pymetis, "
                         "which is not installed (pip install 'mixgcn[parallel]')") from None
    g = sp.csr_array(a + a.T)  # METIS wants a symmetric graph without self loops
    g.setdiag(0)
    g.eliminate_zeros()
    graph = pymetis.CSRAdjacency(adj_starts=g.indptr.astype(np.int64),
                                 adjacent=g.indices.astype(np.int64))
    # a fixed seed: the same partition on every run and every MPI rank
    _, membership = pymetis.part_graph(parts, graph, options=pymetis.Options(seed=0))
    owner = np.asarray(membership, dtype=np.int64)
    # METIS may leave a part empty on tiny or disconnected graphs: refill it from the
    # largest one, so every part has a node
    for p in range(parts):
        if not np.any(owner == p):
            big = np.bincount(owner, minlength=parts).argmax()
            owner[np.flatnonzero(owner == big)[-1]] = p
    return owner

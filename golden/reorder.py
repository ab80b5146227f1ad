"""Node reordering: host preprocessing that renumbers a graph's nodes (docs/architecture.md).

The chip's SpMM gathers row i of ``Â · X`` from the rows of X its neighbours name, and
it may start before X is fully in its buffer: a row is gathered as soon as every
neighbour has arrived (rows arrive in order, from memory or straight from the DCE).
How early that is depends on the numbering: with neighbours close to their row
(small *bandwidth* ``max |i - j|``), the SpMM trails the rows arriving by a few
cycles; with neighbours anywhere, it waits for almost all of them.

``rcm`` is reverse Cuthill–McKee (SciPy), which numbers nodes breadth-first from a
low-degree node so that neighbours get close numbers. ``metis`` numbers the nodes part
by part of a METIS partition into parts of about :data:`METIS_PART_NODES` nodes (few
edges between parts; within a part nodes keep their order): when the graph is larger
than the sparse engine's buffer, a block of rows then uses few rows of X outside its
own part, so its column windows load fewer rows (docs/tiling.md). A reordering renumbers every
per-node array (features, labels, splits) consistently: the GCN computes the same
function, only the rows move.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from mixgcn.golden.datasets import Dataset
from mixgcn.golden.graph import metis_parts

__all__ = ["METIS_PART_NODES", "ORDERINGS", "bandwidth", "node_order", "reorder", "trailing_lag"]

ORDERINGS = ("none", "rcm", "metis")
# the size of a part of the metis order: a part's rows fit any preset's buffer
METIS_PART_NODES = 1024


def node_order(dataset: Dataset, method: str) -> np.ndarray:
    """``perm``: the node that gets number i is ``perm[i]``."""
    if method not in ORDERINGS:
        raise ValueError(f"unknown node ordering {method!r}: expected one of {ORDERINGS}")
    n = dataset.num_nodes
    if method == "none" or n == 0:
        return np.arange(n, dtype=np.int64)
    src, dst = dataset.edge_index
    adj = sp.csr_array((np.ones(src.size, dtype=np.int8), (src, dst)), shape=(n, n))
    if method == "metis":
        parts = metis_parts(adj, max(1, -(-n // METIS_PART_NODES)))
        return np.argsort(parts, kind="stable").astype(np.int64)
    return np.asarray(reverse_cuthill_mckee(sp.csr_matrix(adj), symmetric_mode=True),
                      dtype=np.int64)


def reorder(dataset: Dataset, perm: np.ndarray) -> Dataset:
    """The dataset with node ``perm[i]`` renumbered ``i``."""
    n = dataset.num_nodes
    perm = np.asarray(perm, dtype=np.int64)
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise ValueError(f"a node order must be a permutation of {n} nodes")
    new = np.empty(n, dtype=np.int64)
    new[perm] = np.arange(n)
    ei = new[dataset.edge_index]
    ei = ei[:, np.lexsort((ei[1], ei[0]))]  # the Dataset contract: sorted by (src, dst)
    return dataclasses.replace(
        dataset, edge_index=ei, features=sp.csr_array(dataset.features[perm]),
        labels=dataset.labels[perm], train_mask=dataset.train_mask[perm],
        val_mask=dataset.val_mask[perm], test_mask=dataset.test_mask[perm])


def bandwidth(dataset: Dataset) -> int:
    """``max |i - j|`` over the edges (0 without edges)."""
    src, dst = dataset.edge_index
    return int(np.abs(src - dst).max()) if src.size else 0


def trailing_lag(dataset: Dataset) -> int:
    """How many rows past row i an SpMM that trails its input must wait for, at worst:
    ``max_i (max_{r <= i} max neighbour of r) - i`` (self-loops included)."""
    n = dataset.num_nodes
    if n == 0:
        return 0
    reach = np.arange(n, dtype=np.int64)
    src, dst = dataset.edge_index
    np.maximum.at(reach, src, dst)
    return int((np.maximum.accumulate(reach) - np.arange(n)).max())

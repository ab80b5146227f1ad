"""Where each chip's share of a tensor lives, and what changing that costs.

A tensor of ``N`` rows (nodes) and ``F`` columns (features) is held by P chips in one
of these :class:`Layout`\\ s (docs/parallelism.md):

- ``NODE`` — chip p holds the rows ``R_p`` of its node partition, every column
  (node-parallel combination; partition parallelism throughout);
- ``FEATURE`` — chip p holds every row of the columns ``S_p`` (feature-parallel
  aggregation, MoP);
- ``HALO`` — chip p holds the rows ``C_p = R_p ∪ B_p``: its own rows and its halo
  ``B_p``, the other chips' nodes its rows of Â reach (partition parallelism's SpMM);
- ``FULL`` — every chip holds everything (a weight-gradient GEMM's right operand).

:func:`transfer` counts, for a tensor held in one layout and needed in another, the
words chip p sends chip q — a P × P matrix counted from the partition's sets, not
estimated. Column slices are contiguous and as even as can be (``S_p``: ``F // P`` or
one more); node partitions are contiguous, METIS's (``pymetis``) or cyclic (node
``r`` on chip ``r mod P``: how the exchange fabric interleaves rows).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mixgcn.golden.graph import metis_parts

__all__ = ["PARALLELISMS", "PARTITIONERS", "Layout", "NodePartition", "column_slices",
           "transfer"]

PARALLELISMS = ("mop", "partition")
PARTITIONERS = ("contiguous", "metis", "cyclic")


class Layout(enum.Enum):
    """How P chips share a tensor (module docstring)."""

    NODE = "node"
    FEATURE = "feature"
    HALO = "halo"
    FULL = "full"


def column_slices(columns: int, parts: int) -> list[np.ndarray]:
    """``S_0 … S_{P-1}``: contiguous, as even as can be; chips beyond ``columns`` get
    an empty slice (a tensor narrower than P leaves them idle)."""
    return np.array_split(np.arange(columns), parts)


@dataclass(frozen=True, eq=False)
class NodePartition:
    """The nodes ``R_p`` of each chip, and each chip's halo ``B_p`` in the graph."""

    owner: np.ndarray  # node -> chip
    rows: tuple[np.ndarray, ...]  # R_p, ascending
    halo_rows: tuple[np.ndarray, ...]  # C_p = R_p ∪ B_p, ascending
    method: str

    @property
    def parts(self) -> int:
        return len(self.rows)

    @property
    def nodes(self) -> int:
        return len(self.owner)

    @classmethod
    def build(cls, adjacency, parts: int, method: str = "contiguous") -> NodePartition:
        """Partition the nodes of ``adjacency`` (square, CSR; its pattern is the graph)
        into ``parts``: contiguous ranges, or METIS's minimum edge cut."""
        a = sp.csr_array(adjacency)
        n = a.shape[0]
        if a.shape != (n, n):
            raise ValueError(f"the adjacency must be square, got {a.shape}")
        check_parts(parts, n, "nodes")
        if method == "contiguous":
            owner = np.repeat(np.arange(parts), [len(r) for r in column_slices(n, parts)])
        elif method == "cyclic":  # node r on chip r mod P: the fabric's row order
            owner = np.arange(n) % parts
        elif method == "metis":
            owner = metis_parts(a, parts)
        else:
            raise ValueError(f"unknown partitioner {method!r}: expected one of "
                             f"{PARTITIONERS}")
        rows = tuple(np.flatnonzero(owner == p) for p in range(parts))
        halo = []
        for r in rows:  # columns the rows reach, and the rows themselves
            reach = np.unique(a[r].indices) if len(r) else np.zeros(0, dtype=np.int64)
            halo.append(np.union1d(r, reach))
        return cls(owner=owner, rows=rows, halo_rows=tuple(halo), method=method)

    def overlap(self) -> np.ndarray:
        """``[q, p]`` = |C_q ∩ R_p|: rows of chip p that chip q's SpMM reads."""
        return np.array([np.bincount(self.owner[c], minlength=self.parts)
                         for c in self.halo_rows])


def check_parts(parts, available: int, what: str) -> None:
    """Refuse a chip count that is not a positive integer or exceeds what it shards."""
    if not isinstance(parts, int | np.integer) or isinstance(parts, bool) or parts < 1:
        raise ValueError(f"the number of chips must be an integer >= 1, got {parts!r}")
    if parts > available:
        raise ValueError(f"{parts} chips for {available} {what}: every chip needs at "
                         f"least one (use at most {available} chips)")




def transfer(have: Layout, need: Layout, shape: tuple[int, int],
             nodes: NodePartition) -> np.ndarray:
    """Words chip p sends chip q (``[p, q]``, diagonal 0) to turn an ``N × F`` tensor
    held in layout ``have`` into layout ``need``. ``HALO`` as a source counts as
    ``NODE`` (a chip owns its rows; the halo is a copy)."""
    n, f = shape
    P = nodes.parts
    if n != nodes.nodes and {have, need} & {Layout.NODE, Layout.HALO}:
        raise ValueError(f"a tensor of {n} rows in a layout over {nodes.nodes} nodes")
    if have == need or have == Layout.FULL:
        return np.zeros((P, P), dtype=np.int64)
    r = np.array([len(x) for x in nodes.rows], dtype=np.int64)
    s = np.array([len(x) for x in column_slices(f, P)], dtype=np.int64)
    if have in (Layout.NODE, Layout.HALO):  # chip p owns R_p × all columns
        words = {
            Layout.NODE: np.diag(r * f),
            Layout.FEATURE: np.outer(r, s),
            Layout.FULL: np.outer(r * f, np.ones(P, dtype=np.int64)),
            Layout.HALO: nodes.overlap().T * f,
        }[need]
    else:  # FEATURE: chip p owns all rows × S_p
        c = np.array([len(x) for x in nodes.halo_rows], dtype=np.int64)
        words = {
            Layout.NODE: np.outer(s, r),
            Layout.FEATURE: np.diag(n * s),
            Layout.FULL: np.outer(n * s, np.ones(P, dtype=np.int64)),
            Layout.HALO: np.outer(s, c),
        }[need]
    words = np.array(words, dtype=np.int64)
    np.fill_diagonal(words, 0)
    return words

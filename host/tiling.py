"""Column windows: an SpMM ``S · X`` whose rows gather from more rows of X than the
sparse engine's buffer holds, cut into pieces that fit (docs/tiling.md).

The rows of S are cut into blocks; each block's columns into windows, each a
contiguous range of at most ``buffer_rows`` rows of X. The chip loads a window's rows
into a buffer bank (one ``LOAD``, the next window's load overlapping this window's
SpMM) and runs the block's rows over it (one ``SPMM``), its row sums kept at
accumulator width in the engine's partial sums between the windows of a block and
rounded once, after the last. Integer sums do not depend on the order of their terms,
so the result equals the untiled product bit for bit.

A block whose columns all fit one window needs no partial sums, so it may have any
number of rows; a block of rows that gather from farther apart has at most
``partial_rows`` rows (the engine's partial-sum memory). Windows skip gaps between the
columns a block uses when loading the gap would cost more than a window's SpMM pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["ColumnWindow", "RowBlock", "WindowPlan", "plan_windows"]

# a window's SpMM pass costs about its block's rows plus this (the pipeline's fill and
# drain, the command's issue): a gap between used columns cheaper to load than that is
# loaded rather than starting another window
_PASS_OVERHEAD = 16


@dataclass(frozen=True)
class ColumnWindow:
    """Rows ``lo`` .. ``lo + rows - 1`` of X, and the block's part of S that uses them
    (``s``: the block's rows × these columns, column j of ``s`` being row lo + j)."""

    lo: int
    rows: int
    s: sp.csr_array


@dataclass(frozen=True)
class RowBlock:
    """Rows ``start`` .. ``start + rows - 1`` of S and the windows they gather from."""

    start: int
    rows: int
    windows: tuple[ColumnWindow, ...]


@dataclass(frozen=True)
class WindowPlan:
    """An SpMM's blocks; ``loads``: windows to load (per pass of L features) and
    ``rows_loaded``: rows of X they load, against ``k`` for an untiled SpMM."""

    blocks: tuple[RowBlock, ...]

    @property
    def tiled(self) -> bool:
        return len(self.blocks) > 1 or len(self.blocks[0].windows) > 1

    @property
    def loads(self) -> int:
        return sum(len(b.windows) for b in self.blocks)

    @property
    def rows_loaded(self) -> int:
        return sum(w.rows for b in self.blocks for w in b.windows)


def _windows(cols: np.ndarray, buffer_rows: int, gap: int) -> list[tuple[int, int]]:
    """Sorted distinct columns cut into (lo, rows) ranges of at most ``buffer_rows``
    rows, a new one also after a gap of more than ``gap`` unused columns."""
    if cols.size == 0:
        return [(0, 1)]  # rows with no non-zeros still give their (zero) sums
    out, lo, prev = [], int(cols[0]), int(cols[0])
    for c in cols[1:].tolist():
        if c - lo >= buffer_rows or c - prev > gap:
            out.append((lo, prev - lo + 1))
            lo = c
        prev = c
    out.append((lo, prev - lo + 1))
    return out


def plan_windows(s: sp.csr_array, *, buffer_rows: int, partial_rows: int,
                 what: str = "SpMM") -> WindowPlan:
    """The blocks and windows of ``S · X`` (S: n × k, CSR) for a buffer of
    ``buffer_rows`` rows and ``partial_rows`` rows of partial sums. When k fits the
    buffer: one block, one window of all k rows (the untiled SpMM)."""
    n, k = s.shape
    if k <= buffer_rows:
        return WindowPlan((RowBlock(0, n, (ColumnWindow(0, k, s),)),))
    if partial_rows == 0:
        raise ValueError(f"{what}: S gathers from {k} rows of X; the sparse engine's buffer "
                         f"holds {buffer_rows} (SAEConfig.max_nodes) and it keeps no partial "
                         "sums to run in column windows (SAEConfig.partial_rows=0)")
    indptr = np.asarray(s.indptr)
    indices = np.asarray(s.indices)
    nnz = np.diff(indptr)
    # each row's first and last column (an empty row fits anywhere)
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    has = nnz > 0
    if has.any():
        starts = indptr[:-1][has]
        first[has] = np.minimum.reduceat(indices, starts) if indices.size else 0
        last[has] = np.maximum.reduceat(indices, starts) if indices.size else 0
    blocks, r = [], 0
    while r < n:
        # one window: extend while every column so far lies within buffer_rows rows
        lo, hi, end = first[r], last[r], r
        while end < n:
            nlo, nhi = min(lo, first[end]), max(hi, last[end])
            if nhi >= 0 and nhi - nlo >= buffer_rows:
                break
            lo, hi, end = nlo, nhi, end + 1
        if end > r:
            lo = 0 if hi < 0 else int(lo)
            rows = 1 if hi < 0 else int(hi) - lo + 1
            blocks.append(RowBlock(r, end - r, (
                ColumnWindow(lo, rows, sp.csr_array(s[r:end, lo:lo + rows])),)))
            r = end
            continue
        # row r alone gathers from farther apart: a block of partial_rows rows, in windows
        end = min(n, r + partial_rows)
        part = s[r:end]
        cols = np.unique(np.asarray(part.indices))
        gap = (end - r) + _PASS_OVERHEAD
        windows = tuple(ColumnWindow(lo, rows, sp.csr_array(part[:, lo:lo + rows]))
                        for lo, rows in _windows(cols, buffer_rows, gap))
        blocks.append(RowBlock(r, end - r, windows))
        r = end
    return WindowPlan(tuple(blocks))

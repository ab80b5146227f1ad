"""Column windows: an SpMM ``S · X`` whose rows gather from more rows of X than the
sparse engine's buffer holds, cut into pieces that fit (docs/tiling.md).

The rows of S are cut into blocks; each block's columns into windows, each a
contiguous range of at most ``buffer_rows`` rows of X. The chip loads a window's rows
into a buffer bank (one ``LOAD``, the next window's load overlapping this window's
SpMM) and runs the block's rows over it (one ``SPMM``), its row sums kept at
accumulator width in the engine's partial sums between the windows of a block and
rounded once, after the last. Integer sums do not depend on the order of their terms,
so the result equals the untiled product bit for bit.

Blocks are formed greedily, in row order. A block whose rows use at most
``buffer_rows`` distinct rows of X is one window and needs no partial sums, so it may
have any number of rows; otherwise a block has ``partial_rows`` rows (the engine's
partial-sum memory) in as many windows as its rows of X need — whichever loads fewer
rows of X per row of S. A window loads only the rows of X its block uses: the host
writes them, in order, as a gathered copy of X (``x_rows``) — or, when they lie close
together, the window is the range of X that holds them, read in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["ColumnWindow", "RowBlock", "WindowPlan", "plan_windows"]

@dataclass(frozen=True)
class ColumnWindow:
    """``rows`` rows of X and the block's part of S that uses them (``s``: the block's
    rows × these rows, in order): rows ``lo`` .. ``lo + rows - 1`` of X, or, when
    ``x_rows`` is given, the rows it lists (a gathered copy; ``lo`` is then 0)."""

    lo: int
    rows: int
    s: sp.csr_array
    x_rows: np.ndarray | None = None


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


def _gathered(part: sp.csr_array, buffer_rows: int) -> tuple[ColumnWindow, ...]:
    """A block's windows over the rows of X it uses (a gathered copy), in order."""
    indices = np.asarray(part.indices)
    cols = np.unique(indices)
    if cols.size == 0:  # rows with no non-zeros still give their (zero) sums
        cols = np.zeros(1, dtype=np.int64)
    used = sp.csr_array((part.data, np.searchsorted(cols, indices), part.indptr),
                        shape=(part.shape[0], cols.size))
    return tuple(ColumnWindow(0, min(buffer_rows, cols.size - c0),
                              sp.csr_array(used[:, c0:c0 + buffer_rows]),
                              cols[c0:c0 + buffer_rows])
                 for c0 in range(0, cols.size, buffer_rows))


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
    seen = np.zeros(k, dtype=bool)
    blocks, r = [], 0
    while r < n:
        # one window: extend the block while the rows of X it uses fit the buffer
        used, end, touched = 0, r, []
        while end < n:
            row = indices[indptr[end]:indptr[end + 1]]
            new = np.unique(row[~seen[row]])
            if used + new.size > buffer_rows:
                break
            seen[new] = True
            touched.append(new)
            used, end = used + new.size, end + 1
        cols = np.sort(np.concatenate(touched)) if touched else np.zeros(0, np.int64)
        seen[cols] = False
        # or partial_rows rows in several windows, when that loads fewer rows a row
        multi_end = min(n, r + partial_rows)
        if end - r < multi_end - r:
            multi_used = np.unique(indices[indptr[r]:indptr[multi_end]]).size
            if end == r or multi_used * (end - r) < used * (multi_end - r):
                blocks.append(RowBlock(r, multi_end - r, _gathered(
                    sp.csr_array(s[r:multi_end]), buffer_rows)))
                r = multi_end
                continue
        part = sp.csr_array(s[r:end])
        if cols.size and cols[-1] - cols[0] < min(buffer_rows, cols.size + cols.size // 4):
            # close together: straight from X in memory (no gathered copy)
            lo, rows = int(cols[0]), int(cols[-1] - cols[0] + 1)
            window = ColumnWindow(lo, rows, sp.csr_array(part[:, lo:lo + rows]))
            blocks.append(RowBlock(r, end - r, (window,)))
        else:
            blocks.append(RowBlock(r, end - r, _gathered(part, buffer_rows)))
        r = end
    return WindowPlan(tuple(blocks))

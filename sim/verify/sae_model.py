"""Transactions of the sparse engine: an SpMM as the words of its streams, with the
rows and statistics the golden model says must come out (cf. :mod:`.dce_model`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import SAEConfig
from mixgcn.golden import fixed
from mixgcn.host.packing import csr_beat_arrays
from mixgcn.host.tiling import plan_windows

__all__ = ["SAEJob", "csr_beats", "make_spmm_jobs"]


def _raw_csr(s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, indices, data) exactly as stored: repeated entries stay repeated (SciPy
    sums duplicates in place on some conversions, which the engine never does)."""
    return (np.array(s.indptr, dtype=np.int64), np.array(s.indices, dtype=np.int64),
            np.array(s.data, dtype=np.int64))


def csr_beats(s: sp.csr_array, edges: int, junk: np.random.Generator | None = None,
              width: int = 16, max_nodes: int = 1) -> list[dict]:
    """S in the engine's beat format (:func:`mixgcn.host.packing.csr_beat_arrays`), one
    dict a beat. With ``junk``, the lanes past ``count`` carry random values (which the
    engine must ignore) instead of zeros."""
    a = csr_beat_arrays(s, edges)
    col, val = a["col"].copy(), a["val"].copy()
    if junk is not None:
        lo, hi = fixed.mant_range(width)
        unused = np.arange(edges) >= a["count"][:, None]
        col[unused] = junk.integers(0, max_nodes, int(unused.sum()))
        val[unused] = junk.integers(lo, hi + 1, int(unused.sum()))
    return [dict(col=c, val=v, count=n, split=p, last=t) for c, v, n, p, t in
            zip(col.tolist(), val.tolist(), a["count"].tolist(), a["split"].tolist(),
                a["last"].tolist(), strict=True)]


@dataclass
class SAEJob:
    """One LOAD + SPMM pair: ``L``-wide slice of X into ``bank``, then S times it.
    In column windows (:mod:`mixgcn.host.tiling`): ``keep`` (the rows' sums stay in the
    partial sums: no rows come out, ``expected`` is empty) and ``accumulate`` (they
    start from the kept ones)."""

    bank: int
    rows: int  # output rows (rows of S)
    x_rows: int  # rows loaded into the bank
    shift: int
    relu: bool
    mask_en: bool
    x_words: list = field(repr=False)
    beats: list = field(repr=False)
    mask_words: list = field(repr=False)
    expected: np.ndarray = field(repr=False)
    max_abs: int = 0
    saturated: int = 0
    keep: bool = False
    accumulate: bool = False

    def commands(self) -> list[dict]:
        windows = ({"keep": int(self.keep), "accumulate": int(self.accumulate)}
                   if self.keep or self.accumulate else {})
        return [dict(op=0, bank=self.bank, rows=self.x_rows, shift=0, relu=0, mask=0),
                dict(op=1, bank=self.bank, rows=self.rows, shift=self.shift,
                     relu=int(self.relu), mask=int(self.mask_en), **windows)]


def make_spmm_jobs(cfg: SAEConfig, s, x, shift: int, relu: bool = False,
                   mask: np.ndarray | None = None, first_bank: int = 0,
                   beats: list | None = None,
                   junk: np.random.Generator | None = None) -> list[SAEJob]:
    """``Y = S · X`` as ⌈F/L⌉ passes (banks alternate), each in the column windows
    the driver would use (one job a window; one window when X fits the buffer). ``s``:
    CSR of mantissas [N, K]; ``x``: mantissas [K, F]; ``mask``: bool [N, F] or None;
    ``junk``: random padding in the beats (see :func:`csr_beats`)."""
    indptr, indices, data = _raw_csr(s)
    lo, hi = fixed.mant_range(cfg.width)
    if data.size and (data.min() < lo or data.max() > hi):
        raise ValueError(f"S holds values outside {cfg.width} bits")
    s = sp.csr_array((data, indices, indptr), shape=s.shape)
    x = np.asarray(x, dtype=np.int64)
    if s.shape[1] != x.shape[0]:
        raise ValueError(f"S is {s.shape} but X has {x.shape[0]} rows")
    plan = plan_windows(s, buffer_rows=cfg.max_nodes, partial_rows=cfg.partial_rows)
    if plan.tiled:  # each window's beats
        beats = None
    elif beats is None:
        beats = csr_beats(s, cfg.edges, junk, cfg.width, cfg.max_nodes)
    degree = np.diff(s.indptr)
    if degree.size and degree.max() > cfg.max_degree:
        raise ValueError(f"a row has {degree.max()} non-zeros; max_degree is {cfg.max_degree}")
    L = cfg.lanes
    acc_all = fixed.spmm(s, x)
    jobs = []
    for f0 in range(0, x.shape[1], L):
        f1 = min(f0 + L, x.shape[1])
        xs = np.zeros((x.shape[0], L), dtype=np.int64)
        xs[:, :f1 - f0] = x[:, f0:f1]
        pmask = None
        if mask is not None:
            pmask = np.zeros((s.shape[0], L), dtype=bool)
            pmask[:, :f1 - f0] = mask[:, f0:f1]
        acc = np.zeros((s.shape[0], L), dtype=np.int64)
        acc[:, :f1 - f0] = acc_all[:, f0:f1]
        for blk in plan.blocks:
            rows = slice(blk.start, blk.start + blk.rows)
            out, stats = fixed.output_stage(acc[rows], shift, cfg.width, relu=relu,
                                            mask=None if pmask is None else pmask[rows])
            mask_words = []
            if pmask is not None:
                mask_words = [int(sum(1 << j for j in range(L) if r[j])) for r in pmask[rows]]
            last = len(blk.windows) - 1
            for i, w in enumerate(blk.windows):
                final = i == last
                jobs.append(SAEJob(
                    bank=(first_bank + len(jobs)) % 2, rows=blk.rows, x_rows=w.rows,
                    shift=shift, relu=relu, mask_en=mask is not None and final,
                    x_words=(xs[w.lo:w.lo + w.rows] if w.x_rows is None
                             else xs[w.x_rows]).tolist(),
                    beats=beats or csr_beats(w.s, cfg.edges, junk, cfg.width, cfg.max_nodes),
                    mask_words=mask_words if final else [],
                    expected=out if final else out[:0],
                    max_abs=stats.max_abs if final else 0,
                    saturated=stats.saturated if final else 0,
                    keep=not final, accumulate=i > 0))
    return jobs

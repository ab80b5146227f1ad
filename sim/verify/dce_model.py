"""Transactions of the dense engine: one operation as the words of its streams, with the
rows and statistics the golden model says must come out.

Testbenches (amaranth.sim and cocotb) and the benchmark drive the engine from a
:class:`DCEJob`; they never compute an expected value themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mixgcn.gen.config import DCEConfig
from mixgcn.golden import fixed
from mixgcn.host.packing import weight_words

__all__ = ["OPS", "DCEJob", "make_job"]

OPS = {"xw": 0, "xwt": 1, "xtg": 2}


@dataclass
class DCEJob:
    op: str
    rows: int
    k: int
    m: int
    shift: int
    relu: bool
    mask_en: bool
    a_words: list = field(repr=False)  # R values each
    b_words: list = field(repr=False)  # max(R, C) values each
    mask_words: list = field(repr=False)  # one int (C bits) per output row
    expected: np.ndarray = field(repr=False)  # output rows × C
    max_abs: int = 0
    saturated: int = 0

    def cmd(self) -> dict:
        return dict(op=OPS[self.op], rows=self.rows, k=self.k, m=self.m, shift=self.shift,
                    relu=int(self.relu), mask=int(self.mask_en))


def _junk(rng, n, width):
    """Values for lanes the engine must ignore: random, so ignoring is checked."""
    lo, hi = fixed.mant_range(width)
    return rng.integers(lo, hi + 1, size=n).tolist() if rng is not None else [0] * n


def make_job(cfg: DCEConfig, op: str, x: np.ndarray, w: np.ndarray, shift: int,
             relu: bool = False, mask: np.ndarray | None = None,
             junk: np.random.Generator | None = None) -> DCEJob:
    """Encode one operation.

    - ``xw``:  ``x`` [N, k], ``w`` [k, m] → ``x·w``;
    - ``xwt``: ``x`` [N, k], ``w`` [m, k] → ``x·wᵀ``;
    - ``xtg``: ``x`` [N, k≤R], ``w`` = G [N, m] → ``xᵀ·G`` ([k, m]).

    ``m <= C``. ``mask`` (bool, output shape) enables the ReLU' mask. With ``junk`` the
    lanes the engine must ignore carry random values instead of zeros.
    """
    if op not in OPS:
        raise ValueError(f"unknown DCE operation {op!r}: expected one of {sorted(OPS)}")
    R, C, V = cfg.rows, cfg.cols, cfg.b_lanes
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    n, k = x.shape
    m = w.shape[1] if op in ("xw", "xtg") else w.shape[0]
    if not 1 <= m <= C:
        raise ValueError(f"output tile width m={m} must be in 1..{C}")
    if op == "xtg":
        if mask is not None:
            raise ValueError("xtg outputs weight gradients: the ReLU' mask does not apply")
        if not 1 <= k <= R or w.shape[0] != n or n > cfg.max_rows:
            raise ValueError(f"xtg needs x [N, k<={R}] and G [N, m] with N <= {cfg.max_rows}; "
                             f"got {x.shape} and {w.shape}")
        a_words = [list(row) + _junk(junk, R - k, cfg.width) for row in x.tolist()]
        b_words = [list(row) + _junk(junk, V - m, cfg.width) for row in w.tolist()]
        acc = fixed.gemm("xtg", x, w)
    else:
        kk = w.shape[0] if op == "xw" else w.shape[1]
        if kk != k or not 1 <= k <= cfg.max_k:
            raise ValueError(f"{op}: reduction length k={k} (weights {w.shape}) must match "
                             f"and lie in 1..{cfg.max_k}")
        chunks = -(-k // R)
        a_words = []
        for row in x.tolist():
            padded = row + _junk(junk, chunks * R - k, cfg.width)
            a_words += [padded[j * R:(j + 1) * R] for j in range(chunks)]
        b = weight_words(op, w, R, V)
        if junk is not None:  # lanes no weight lands in carry junk
            unused = weight_words(op, np.ones_like(w), R, V) == 0
            lo, hi = fixed.mant_range(cfg.width)
            b[unused] = junk.integers(lo, hi + 1, int(unused.sum()))
        b_words = b.tolist()
        acc = fixed.gemm(op, x, w)
    out, stats = fixed.output_stage(acc, shift, cfg.width, relu=relu, mask=mask)
    expected = np.zeros((out.shape[0], C), dtype=np.int64)
    expected[:, :m] = out
    mask_words = []
    if mask is not None:
        bits = np.asarray(mask, dtype=bool)
        mask_words = [int(sum(1 << c for c in range(m) if r[c])) for r in bits]
    return DCEJob(op=op, rows=n, k=k, m=m, shift=shift, relu=relu, mask_en=mask is not None,
                  a_words=a_words, b_words=b_words, mask_words=mask_words, expected=expected,
                  max_abs=stats.max_abs, saturated=stats.saturated)

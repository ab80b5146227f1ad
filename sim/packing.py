"""Pack many stream words at once (numpy), bit for bit as ``layout.const(...).as_bits()``.

Loading a kernel's operands means tens of thousands of words; building each through
``layout.const`` costs tens of microseconds, this a few hundred nanoseconds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from amaranth import Shape
from amaranth.lib import data

__all__ = ["csr_beat_arrays", "pack"]


def _leaves(layout, offset=0):
    """(path, offset, width) of every scalar field, paths as tuples of names/indices."""
    if isinstance(layout, data.StructLayout):
        for name, field in layout:
            for path, off, width in _leaves(field.shape, offset + field.offset):
                yield (name, *path), off, width
    elif isinstance(layout, data.ArrayLayout):
        width = Shape.cast(layout.elem_shape).width
        for i in range(layout.length):
            for path, off, w in _leaves(layout.elem_shape, offset + i * width):
                yield (i, *path), off, w
    else:
        yield (), offset, Shape.cast(layout).width


def pack(layout, values) -> list[int]:
    """Words of ``layout`` from column arrays: ``values`` is an array (an ArrayLayout of
    scalars: shape [N, length]) or a dict of them by field name (a StructLayout)."""
    bits = None
    n = None
    for path, off, width in _leaves(layout):
        v = values
        for key in path:  # field names select arrays, indices select their columns
            v = v[key] if isinstance(key, str) else np.asarray(v)[:, key]
        v = np.asarray(v, dtype=np.int64)
        if bits is None:
            n = v.shape[0]
            bits = np.zeros((n, Shape.cast(layout).width), dtype=np.uint8)
        bits[:, off:off + width] = (v[:, None] >> np.arange(width)) & 1  # two's complement
    packed = np.packbits(bits, axis=1, bitorder="little")
    return [int.from_bytes(row.tobytes(), "little") for row in packed]


def csr_beat_arrays(s: sp.csr_array, edges: int) -> dict:
    """S as beats (see :mod:`mixgcn.hdl.sae`), as column arrays for :func:`pack`:
    ``col``/``val`` [B, E], ``count``, ``split``, ``last`` [B]. Pairs fill beats in CSR
    order across rows; a beat closes when it is full or when a second row end would
    enter it. Repeated entries stay repeated."""
    indptr = np.asarray(s.indptr, dtype=np.int64)
    nnz = int(indptr[-1])
    # beat number and lane of every pair, and the beat of every row end, in one pass
    pair_beat = np.empty(nnz, dtype=np.int64)
    pair_lane = np.empty(nnz, dtype=np.int64)
    end_beat = np.empty(len(indptr) - 1, dtype=np.int64)
    end_split = np.empty(len(indptr) - 1, dtype=np.int64)
    beat, fill, has_end = 0, 0, False
    for i in range(len(indptr) - 1):
        for p in range(int(indptr[i]), int(indptr[i + 1])):
            if fill == edges:
                beat, fill, has_end = beat + 1, 0, False
            pair_beat[p], pair_lane[p] = beat, fill
            fill += 1
        if has_end:  # this beat already ends a row: the end goes to the next one
            beat, fill = beat + 1, 0
        end_beat[i], end_split[i] = beat, fill
        has_end = True
    nbeats = beat + 1 if (nnz or len(end_beat)) else 0
    col = np.zeros((nbeats, edges), dtype=np.int64)
    val = np.zeros((nbeats, edges), dtype=np.int64)
    col[pair_beat, pair_lane] = np.asarray(s.indices, dtype=np.int64)[:nnz]
    val[pair_beat, pair_lane] = np.asarray(s.data, dtype=np.int64)[:nnz]
    count = np.bincount(pair_beat, minlength=nbeats)
    split = count.copy()
    last = np.zeros(nbeats, dtype=np.int64)
    last[end_beat] = 1
    split[end_beat] = end_split
    return dict(col=col, val=val, count=count, split=split, last=last)


def unpack_signed(words, width: int, count: int, offset: int = 0) -> np.ndarray:
    """``count`` signed ``width``-bit fields from ``offset`` of each word, as [N, count]
    (the inverse of :func:`pack` for an array of scalars)."""
    total = offset + width * count
    nbytes = (total + 7) // 8
    raw = b"".join(int(w).to_bytes(nbytes + 1, "little", signed=False) for w in words)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(words), nbytes + 1),
                         axis=1, bitorder="little")[:, offset:total]
    fields = bits.reshape(len(words), count, width).astype(np.int64)
    values = (fields << np.arange(width)).sum(axis=2)
    return np.where(values >= 1 << (width - 1), values - (1 << width), values)

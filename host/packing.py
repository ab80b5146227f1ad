"""Stream and memory words as byte arrays, packed many at once (numpy).

A word is ``nbytes`` little-endian bytes holding a ``lib.data`` layout's bits from bit
0 up, exactly as ``layout.const(...).as_bits()`` gives them; arrays of words are
``uint8 [N, nbytes]``. Loading a kernel's operands means tens of thousands of words:
building each through ``layout.const`` costs tens of microseconds, this a few hundred
nanoseconds.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from amaranth import Shape
from amaranth.lib import data

__all__ = ["beat_walk", "csr_beat_arrays", "csr_beat_count", "from_ints", "pack", "to_ints",
           "unpack_signed", "unpack_unsigned", "weight_words", "word_bytes"]


def word_bytes(width: int) -> int:
    """Bytes a word of ``width`` bits takes."""
    return (int(width) + 7) // 8


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


def pack(layout, values, nbytes: int | None = None) -> np.ndarray:
    """Words of ``layout`` from column arrays, as ``uint8 [N, nbytes]`` (default: the
    layout's own width). ``values`` is an array (an ArrayLayout of scalars: shape
    ``[N, length]``) or a dict of them by field name (a StructLayout)."""
    width = Shape.cast(layout).width
    nbytes = word_bytes(width) if nbytes is None else nbytes
    if nbytes < word_bytes(width):
        raise ValueError(f"a {width}-bit word does not fit {nbytes} bytes")
    bits = None
    for path, off, w in _leaves(layout):
        v = values
        for key in path:  # field names select arrays, indices select their columns
            v = v[key] if isinstance(key, str) else np.asarray(v)[:, key]
        v = np.asarray(v, dtype=np.int64)
        if bits is None:
            bits = np.zeros((v.shape[0], nbytes * 8), dtype=np.uint8)
        bits[:, off:off + w] = (v[:, None] >> np.arange(w)) & 1  # two's complement
    if bits is None:
        raise ValueError(f"layout {layout!r} has no fields")
    return np.packbits(bits, axis=1, bitorder="little")


def from_ints(words, nbytes: int) -> np.ndarray:
    """Python integers (``layout.const(...).as_bits()``) as ``uint8 [N, nbytes]``."""
    return np.frombuffer(b"".join(int(w).to_bytes(nbytes, "little") for w in words),
                         dtype=np.uint8).reshape(-1, nbytes)


def to_ints(words: np.ndarray) -> list[int]:
    """The inverse of :func:`from_ints`."""
    return [int.from_bytes(row.tobytes(), "little") for row in np.asarray(words, np.uint8)]


def unpack_signed(words: np.ndarray, width: int, count: int, offset: int = 0) -> np.ndarray:
    """``count`` signed ``width``-bit fields from bit ``offset`` of each word, as int64
    ``[N, count]`` (the inverse of :func:`pack` for an array of scalars)."""
    words = np.asarray(words, dtype=np.uint8)
    bits = np.unpackbits(words, axis=1, bitorder="little")[:, offset:offset + width * count]
    fields = bits.reshape(len(words), count, width).astype(np.int64)
    values = (fields << np.arange(width)).sum(axis=2)
    return np.where(values >= 1 << (width - 1), values - (1 << width), values)



def unpack_unsigned(layout, words: np.ndarray, field: str) -> np.ndarray:
    """The unsigned values of ``field`` of a StructLayout ``layout`` in packed
    ``words``, as int64 ``[N, n]``: n = 1 for a scalar field, its length for an array
    of scalars (the inverse of :func:`pack` for one field)."""
    bits = np.unpackbits(np.asarray(words, dtype=np.uint8), axis=1, bitorder="little")
    leaves = [(off, w) for path, off, w in _leaves(layout) if path[0] == field]
    if not leaves:
        raise ValueError(f"the layout has no field {field!r}")
    return np.stack([(bits[:, off:off + w].astype(np.int64) << np.arange(w)).sum(axis=1)
                     for off, w in leaves], axis=1)

# ----------------------------------------------------------------------- CSR beats


def beat_walk(indptr: np.ndarray, edges: int):
    """Where the beat format (:mod:`mixgcn.hdl.sae`) puts each row: the beat and
    position of its first pair, the beat and split of its end; and the beat count.

    Pairs fill beats in CSR order across rows; a beat closes when it is full or when a
    second row end would enter it. One step per row (not per non-zero)."""
    degrees = np.diff(np.asarray(indptr, dtype=np.int64)).tolist()
    n = len(degrees)
    start_beat = np.empty(n, dtype=np.int64)
    start_pos = np.empty(n, dtype=np.int64)
    end_beat = np.empty(n, dtype=np.int64)
    end_split = np.empty(n, dtype=np.int64)
    beat, fill, has_end = 0, 0, False
    for i, d in enumerate(degrees):
        start_beat[i], start_pos[i] = beat, fill
        if d:
            advance = (fill + d - 1) // edges  # new beats the row's pairs open
            if advance:
                beat, has_end = beat + advance, False
            fill = (fill + d - 1) % edges + 1
        if has_end:  # this beat already ends a row: the end goes to the next one
            beat, fill = beat + 1, 0
        end_beat[i], end_split[i] = beat, fill
        has_end = True
    nbeats = beat + 1 if n else 0
    return start_beat, start_pos, end_beat, end_split, nbeats


def csr_beat_count(s, edges: int) -> int:
    """Beats S takes in the SAE's format with ``edges`` pipelines (without packing)."""
    return beat_walk(sp.csr_array(s).indptr, edges)[-1]


def csr_beat_arrays(s: sp.csr_array, edges: int) -> dict:
    """S as beats (see :mod:`mixgcn.hdl.sae`), as column arrays for :func:`pack`:
    ``col``/``val`` [B, E], ``count``, ``split``, ``last`` [B]. Repeated entries stay
    repeated."""
    indptr = np.asarray(s.indptr, dtype=np.int64)
    start_beat, start_pos, end_beat, end_split, nbeats = beat_walk(indptr, edges)
    nnz = int(indptr[-1]) if len(indptr) else 0
    degrees = np.diff(indptr)
    pos = np.repeat(start_pos, degrees) + (np.arange(nnz) - np.repeat(indptr[:-1], degrees))
    pair_beat = np.repeat(start_beat, degrees) + pos // edges
    pair_lane = pos % edges
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


def weight_words(form: str, w: np.ndarray, rows: int, lanes: int) -> np.ndarray:
    """The DCE's B-stream words that load a weight tile, [words, lanes], zero-padded.

    - ``xw`` (``w`` [k, m]): word j = ``w[j, :]``;
    - ``xwt`` (``w`` [m, k], stored as rows): word (j, c) = ``w[c, jR : jR + R]``, chunk j
      major — the engine writes it down column c of the array (R = ``rows``).
    """
    w = np.asarray(w, dtype=np.int64)
    if form == "xw":
        out = np.zeros((w.shape[0], lanes), dtype=np.int64)
        out[:, :w.shape[1]] = w
        return out
    m, k = w.shape
    chunks = -(-k // rows)
    wp = np.zeros((m, chunks * rows), dtype=np.int64)
    wp[:, :k] = w
    out = np.zeros((chunks * m, lanes), dtype=np.int64)
    out[:, :rows] = wp.reshape(m, chunks, rows).transpose(1, 0, 2).reshape(chunks * m, rows)
    return out

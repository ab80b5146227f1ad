"""Projection on paper: a training epoch of graphs this machine cannot hold, on P chips.

Everything here is **model output**, labelled so wherever it is reported: no chip ran
these graphs, and no simulator did. It answers, for a graph known only by its
statistics (:class:`GraphStats`: nodes, the non-zeros of Â, feature widths, classes):

- **work**: the epoch's kernels (:func:`epoch_calls`, the training loop's own schedule:
  a test checks it against the calls a real run makes) and each chip's share of them
  on P chips, by Mixture of Parallelism or the partition baseline
  (docs/parallelism.md);
- **cycles**: each share's cycles from the configuration and the statistics
  (:class:`KernelCycles`), with the descriptor-level model's rates and latencies
  (:mod:`mixgcn.host.perf_model`) for the busiest chip's share; an exchange its bytes
  over the chips' links; at a clock (the board flow's measured Fmax) that is an
  epoch's time;
- **bytes between chips and memory per chip**: taken from the real sharded backend run
  on a small proxy graph of the same widths and scaled by the node count (every
  exchange of MoP moves whole columns of N rows, so its bytes are linear in N); the
  partition baseline's halo is estimated for a partition with no locality (a random
  graph's: every node outside a chip's rows that one of them reaches);
- **chips needed by memory**: the fewest chips (a power of two) whose per-chip share
  of the graph, features and weights fits a board's memory and the chip's address
  space;
- **limits**: what of the configuration the graph exceeds (accumulator depths, the
  longest row), with the values it would need. Cycles are given as if those were
  raised: they do not change a rate.

What the statistics do not say is assumed and stated: row lengths (beats are counted
on rows of the mean length), and, when an SpMM's rows gather from more rows of X than
the buffer holds, the graph's locality (assumed none: a random graph's column
windows, the most rows loaded). docs/projection.md has the formulas and their check
against the descriptor-level model on graphs this machine holds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import MEMORY_PROFILES, ChipConfig, MemoryProfile
from mixgcn.golden.fixed import required_acc_width
from mixgcn.golden.gcn import GCNConfig
from mixgcn.host.packing import beat_walk, csr_beat_count
from mixgcn.host.perf_model import PerfModel
from mixgcn.host.tiling import plan_windows

__all__ = ["BOARD_MEMORY", "PROJECTED_GRAPHS", "Call", "GraphStats", "KernelCycles",
           "ShareKernel", "epoch_calls", "epoch_cycles", "exchange_bytes", "limits",
           "memory_per_chip", "modelled_epoch", "project", "table"]

INDEX_BYTES = 4  # a CSR index, as the sharded backend counts the graph's bytes


@dataclass(frozen=True)
class GraphStats:
    """A graph by its statistics: ``nodes``; ``nnz``: non-zeros of Â (every edge in
    both directions and a self-loop a node); ``features``, ``classes``;
    ``feature_nnz``: non-zeros of the feature matrix (``nodes · features`` when dense);
    ``max_degree``: the longest row of Â, if known; ``adjacency``: Â itself, for a
    graph this machine holds (then its SpMMs' beats and column windows are the
    driver's own, which checks the cycle formulas apart from the statistics'
    estimates); ``source``: where the figures come from."""

    name: str
    nodes: int
    nnz: int
    features: int
    classes: int
    feature_nnz: int
    max_degree: int | None = None
    adjacency: sp.csr_array | None = dataclasses.field(default=None, repr=False,
                                                       compare=False)
    source: str = ""

    def __post_init__(self):
        for f in ("nodes", "nnz", "features", "classes", "feature_nnz"):
            v = getattr(self, f)
            if not (isinstance(v, int | np.integer) and v >= 1):
                raise ValueError(f"{self.name}: {f} must be a positive integer, got {v!r}")
        if self.nnz < self.nodes:
            raise ValueError(f"{self.name}: nnz={self.nnz} is below nodes={self.nodes} "
                             "(Â has a self-loop on every node)")
        if self.feature_nnz > self.nodes * self.features:
            raise ValueError(f"{self.name}: feature_nnz={self.feature_nnz} exceeds nodes x "
                             f"features = {self.nodes * self.features}")

    @property
    def mean_degree(self) -> float:
        return self.nnz / self.nodes

    @classmethod
    def of(cls, dataset) -> GraphStats:
        """The statistics of a dataset this machine holds."""
        from mixgcn.golden.graph import normalized_adjacency

        a = normalized_adjacency(dataset.edge_index, dataset.num_nodes)
        return cls(dataset.name, int(dataset.num_nodes), int(a.nnz),
                   int(dataset.num_features), int(dataset.num_classes),
                   int(dataset.features.nnz), int(np.diff(a.indptr).max()), a,
                   "computed from the data")

    def statistics_only(self) -> GraphStats:
        """The same graph known only by its statistics (as a projected graph is)."""
        return dataclasses.replace(self, adjacency=None)


# Published sizes. nnz counts Â's non-zeros: each undirected edge twice, one self-loop
# a node. Features are dense in all three (feature_nnz = nodes · features).
PROJECTED_GRAPHS = {
    "reddit": GraphStats(
        "reddit", 232_965, 114_615_892 + 232_965, 602, 41, 232_965 * 602,
        source="Hamilton et al. 2017 as PyTorch Geometric's Reddit: 232,965 nodes, "
               "114,615,892 directed edges (both directions), 602 features, 41 classes"),
    "ogbn-products": GraphStats(
        "ogbn-products", 2_449_029, 2 * 61_859_140 + 2_449_029, 100, 47, 2_449_029 * 100,
        source="OGB (Hu et al. 2020): 2,449,029 nodes, 61,859,140 undirected edges, "
               "100 features, 47 classes"),
    "ogbn-papers100M": GraphStats(
        "ogbn-papers100M", 111_059_956, 2 * 1_615_685_872 + 111_059_956, 128, 172,
        111_059_956 * 128,
        source="OGB (Hu et al. 2020): 111,059,956 nodes, 1,615,685,872 directed citation "
               "edges, symmetrised here without removing reciprocal pairs (an upper "
               "bound on Â's non-zeros), 128 features, 172 classes"),
}

# memory a chip has on a board (bytes), for "chips needed by memory"
BOARD_MEMORY = {
    "ulx3s-85f": 32 * 2**20,   # 32 MB SDR SDRAM
    "ecpix5-85f": 256 * 2**20,  # 256 MB DDR3
}


# ------------------------------------------------------------------------ the schedule
@dataclass(frozen=True)
class Call:
    """One call of the training loop on its backend: ``method`` (``spmm``, ``gemm``,
    ``spmm_gemm``, ``gemm_spmm``, ``spmm_and_gemm``), its ``sites`` and its kernels'
    widths: ``spmm`` aggregates ``agg`` columns; the GEMM is ``form`` of an X
    ``fin`` wide into ``fout`` columns (``xwt``: G ``fin`` wide times Wᵀ into ``fout``;
    ``xtg``: Xᵀ·G, X ``fin`` and G ``fout`` wide), ``sparse`` when X is the input
    features (CSR)."""

    method: str
    sites: tuple[str, ...]
    agg: int = 0
    form: str = ""
    fin: int = 0
    fout: int = 0
    sparse: bool = False


def epoch_calls(dims: list[tuple[int, int]]) -> list[Call]:
    """The calls one training epoch makes (forward, then backward), for a GCN of layer
    widths ``dims`` — the schedule of :class:`mixgcn.golden.gcn.GCN` (a test records a
    real run's calls and compares)."""
    calls: list[Call] = []
    order = []
    for l, (fin, fout) in enumerate(dims):
        sparse = l == 0
        if fin > fout:  # combine first: T = X·W, then Â·T
            calls.append(Call("gemm_spmm", (f"L{l}.fwd.comb", f"L{l}.fwd.agg"), agg=fout,
                              form="xw", fin=fin, fout=fout, sparse=sparse))
            order.append("comb")
        else:
            calls.append(Call("spmm_gemm", (f"L{l}.fwd.agg", f"L{l}.fwd.comb"), agg=fin,
                              form="xw", fin=fin, fout=fout))
            order.append("agg")
    pending = None  # (layer, fin, fout) of a weight gradient not computed yet

    def wgrad(l, fin, fout):
        calls.append(Call("gemm", (f"L{l}.bwd.wgrad",), form="xtg", fin=fin, fout=fout,
                          sparse=l == 0 and order[0] == "comb"))

    for l in range(len(dims) - 1, -1, -1):
        fin, fout = dims[l]
        if order[l] == "comb":
            if l:
                if pending:
                    wgrad(*pending)
                    pending = None
                calls.append(Call("spmm_gemm", (f"L{l}.bwd.agg", f"L{l}.bwd.comb"), agg=fout,
                                  form="xwt", fin=fout, fout=fin))
            elif pending:
                pl, pin, pout = pending
                calls.append(Call("spmm_and_gemm", (f"L{l}.bwd.agg", f"L{pl}.bwd.wgrad"),
                                  agg=fout, form="xtg", fin=pin, fout=pout))
                pending = None
            else:
                calls.append(Call("spmm", (f"L{l}.bwd.agg",), agg=fout))
            pending = (l, fin, fout)
        else:
            if pending:
                wgrad(*pending)
                pending = None
            # A = Â·Hd is dense even on layer 0 (the SpMM's output)
            calls.append(Call("gemm", (f"L{l}.bwd.wgrad",), form="xtg", fin=fin, fout=fout))
            if l:
                calls.append(Call("gemm_spmm", (f"L{l}.bwd.comb", f"L{l}.bwd.agg"), agg=fin,
                                  form="xwt", fin=fout, fout=fin))
    if pending:
        wgrad(*pending)
    return calls


# ------------------------------------------------------------------- kernel cycles
@dataclass(frozen=True)
class ShareKernel:
    """One chip's share of a kernel, as the chip runs it: ``spmm`` (S ``n`` × ``k``
    with ``nnz`` non-zeros, times X ``k`` × ``f``; ``matrix``: S itself, if known), a
    dense GEMM ``xw`` / ``xwt`` (``n`` rows, reduction ``k``, ``f`` output columns) or
    ``xtg`` (reduction over ``n`` rows, ``k`` × ``f`` output)."""

    op: str
    n: int
    k: int
    f: int
    nnz: int = 0
    matrix: sp.csr_array | None = dataclasses.field(default=None, repr=False, compare=False)


class KernelCycles:
    """Cycles of a chip's kernels from their shapes and statistics, at the
    descriptor-level model's rates and latencies (docs/projection.md)."""

    def __init__(self, config: ChipConfig, memory: MemoryProfile = MEMORY_PROFILES["ideal"]):
        self.config, self.memory = config, memory
        self.m = PerfModel(config, memory)
        self.lat = self.m.lat
        # a known S's windows, by the matrix (an epoch's SpMMs share Â): the driver's
        # plan walks its rows in Python, so it is made once
        self._planned: dict[int, tuple[sp.csr_array, list]] = {}

    def _bandwidth(self, cycles: float, words: float) -> float:
        if self.memory.bandwidth:
            cycles = max(cycles, words * self.m.lay.mem_width / self.memory.bandwidth)
        return cycles

    def beats(self, k: ShareKernel) -> float:
        """CSR beats of one pass, as the driver packs them (pairs fill beats across
        rows; a beat holds at most one row's end): counted exactly from the row lengths
        when known, else from rows of the mean length (up to 100,000 rows walked,
        scaled), each row's non-zeros spread evenly over ``windows`` windows."""
        E = self.config.sae.edges
        if k.matrix is not None:
            return float(csr_beat_count(k.matrix, E))
        rows = k.n
        sample = min(rows, 100_000)
        total = k.nnz * sample / rows  # the sample's share of the non-zeros
        deg = np.full(sample, int(total // sample), dtype=np.int64)
        deg[:round(total - deg.sum())] += 1
        indptr = np.concatenate([[0], np.cumsum(deg)])
        return float(beat_walk(indptr, E)[-1]) * rows / sample

    def windows(self, k: ShareKernel) -> tuple[list[tuple[float, float, float]], float]:
        """A pass's windows as one block of them repeated: (rows of X loaded, beats,
        rows out) each, and how many blocks a pass has. Untiled (X's k rows fit the
        buffer): one window of k rows, all beats, every row out. Tiled, for a known S
        the driver's own windows; else, with no locality, the cheaper of one-window
        blocks (a block's rows until they use a buffer's worth of rows of X: a row
        loaded per non-zero, about) and blocks of ``partial_rows`` rows B over the
        distinct rows of X they use, a random graph's k·(1 − e^(−B·d/k)), in windows of
        a buffer each, each taking its share of the non-zeros by its rows; a block's
        rows leave after its last window (before, their sums are kept)."""
        sa = self.config.sae
        if k.k <= sa.max_nodes:
            return [(float(k.k), self.beats(k), float(k.n))], 1
        if k.matrix is not None:  # the driver's own windows, in one pass
            hit = self._planned.get(id(k.matrix))
            if hit is None or hit[0] is not k.matrix:
                plan = plan_windows(k.matrix, buffer_rows=sa.max_nodes,
                                    partial_rows=sa.partial_rows)
                hit = self._planned[id(k.matrix)] = (k.matrix, [
                    (float(w.rows), float(csr_beat_count(w.s, sa.edges)),
                     float(blk.rows) if i == len(blk.windows) - 1 else 0.0)
                    for blk in plan.blocks for i, w in enumerate(blk.windows)])
            return hit[1], 1
        d = k.nnz / max(1, k.n)
        buf = sa.max_nodes
        single = float(k.nnz)  # rows loaded by one-window blocks
        multi = math.inf
        if sa.partial_rows:
            B = min(sa.partial_rows, k.n)
            distinct = k.k * -math.expm1(-B * d / k.k)
            multi = k.n / B * distinct
        if multi < single:
            W = max(1, math.ceil(distinct / buf))
            rows = [float(buf)] * (W - 1) + [distinct - buf * (W - 1)]
            # a beat for every row of the block at the least in each window
            return [(r, self.beats(ShareKernel("spmm", B, r, k.f, round(B * d * r / distinct))),
                     float(B) if i == W - 1 else 0.0)
                    for i, r in enumerate(rows)], k.n / B
        blocks = max(1.0, single / buf)
        return [(min(float(buf), single), self.beats(k) / blocks, k.n / blocks)], blocks

    def _pipeline(self, block: list[tuple[float, float, float]],
                  count: float) -> tuple[float, float]:
        """Cycles of ``count`` blocks of windows (rows, beats, rows out) in a row, as
        the driver issues them, and when the last SPMM is issued (what comes after it
        in the batch waits for that): each window's LOAD into the bank its window
        before last used (waiting for that window's SPMM), each SPMM after the one
        before and, its rows' columns at random, through its beats once its own LOAD is
        done (a beat waits for every row it gathers), at the least at its rows' pace
        through the output path's credit. Simulated for a few blocks; the rest at the
        last one's pace."""
        w = self.m.word
        credit = max(1.0, self.m.sae_loop / self.config.sae.out_fifo_depth)
        load_end, spmm_end = 0.0, [0.0, 0.0]  # the last LOAD's end, the last two SPMMs'
        ends = []
        sim = min(math.ceil(count), 6)
        for _ in range(sim):
            for rows, beats, out in block:
                start = max(load_end, spmm_end[0])  # the bank's previous SPMM done
                load_end = start + rows * w
                done = max(spmm_end[1], load_end) + max(beats * w, out * credit)
                spmm_end = [spmm_end[1], done]
            ends.append(spmm_end[1])
        last = block[-1]
        tail = max(last[1] * w, last[2] * credit)
        if count <= sim:
            end = ends[-1] - (sim - count) * (ends[-1] - (ends[-2] if sim > 1 else 0))
        else:
            end = ends[-1] + (count - sim) * (ends[-1] - ends[-2] if sim > 1 else ends[-1])
        return end, max(0.0, end - tail)

    def spmm(self, k: ShareKernel) -> tuple[float, float]:
        """An SpMM alone: ⌈f/L⌉ passes over its blocks of windows (:meth:`windows`,
        :meth:`_pipeline`); its cycles and when its last SPMM descriptor issues."""
        sa, lat = self.config.sae, self.lat
        passes = max(1, -(-k.f // sa.lanes))
        block, blocks = self.windows(k)
        body, issued = self._pipeline(block, passes * blocks)
        fixed = lat.load_first + lat.gather + lat.spmm_first
        cycles = body + fixed + lat.spmm_done + lat.batch_end
        words = passes * blocks * sum(r + b + o for r, b, o in block)
        return self._bandwidth(cycles, words), issued + fixed

    def gemm(self, k: ShareKernel) -> float:
        """A dense GEMM alone: per tile of C output columns its weights, then a row per
        ⌈k/R⌉ words (at the output path's pace); ``xtg``: per R × C tile of the
        product, one (a, b) pair a row, then the tile's rows drained."""
        d, lat, w = self.config.dce, self.lat, self.m.word
        if k.op == "xtg":
            kt, mt = -(-k.k // d.rows), -(-k.f // d.cols)
            tile = lat.gemm_first + k.n * w + d.rows + lat.xtg_done
            return self._bandwidth(kt * mt * tile + lat.batch_end,
                                   kt * mt * (2 * k.n + d.rows))
        chunks, mt = max(1, -(-k.k // d.rows)), max(1, -(-k.f // d.cols))
        b_len = k.k if k.op == "xw" else chunks * min(k.f, d.cols)
        period = max(chunks * w, self.m.dce_loop / d.out_fifo_depth)
        tile = lat.gemm_first + b_len * w + lat.gemm_settle + k.n * period \
            + self.m.dce_loop + chunks + lat.gemm_done
        return self._bandwidth(mt * tile + lat.batch_end, mt * (b_len + k.n * (chunks + 1)))

    def __call__(self, k: ShareKernel) -> float:
        return self.spmm(k)[0] if k.op == "spmm" else self.gemm(k)


# ------------------------------------------------------------------ per-chip shares
def _share(n: int, P: int) -> int:
    return -(-n // P)


def _kernels(call: Call, g: GraphStats, P: int, parallelism: str,
             keep: float = 1.0) -> tuple[list, list]:
    """The busiest chip's share of a call's SpMM and GEMM (empty lists where the call
    has none). ``keep``: the fraction of the input features dropout keeps (the
    training loop drops them from the CSR matrix, so its kernels see fewer)."""
    N = g.nodes
    # one chip without dropout: the whole feature matrix's own rows and columns
    xnnz = round(g.feature_nnz * keep)
    spmm = []
    if call.method in ("spmm", "spmm_gemm", "gemm_spmm", "spmm_and_gemm"):
        if parallelism == "mop" or P == 1:  # all N rows, its columns
            spmm = [ShareKernel("spmm", N, N, _share(call.agg, P), g.nnz,
                                g.adjacency)]
        elif g.adjacency is not None:  # the busiest share of the sharded backend's own
            spmm = [_partition_share(g, P, call.agg)]
        else:  # its rows, over its halo's rows of X
            halo = _share(N, P) + halo_rows(g, P)
            spmm = [ShareKernel("spmm", _share(N, P), min(N, halo), call.agg,
                                _share(g.nnz, P))]
    gemm = []
    if call.form:
        if call.form == "xtg":
            if call.sparse:  # Xᵀ·G on the sparse engine: Xᵀ's rows K_p over all N nodes
                gemm = [ShareKernel("spmm", _share(call.fin, P), N, call.fout,
                                    _share(xnnz, P))]
            else:
                gemm = [ShareKernel("xtg", N, _share(call.fin, P), call.fout)]
        elif call.sparse:  # X·W on the sparse engine: its rows of X, W in the buffer
            gemm = [ShareKernel("spmm", _share(N, P), call.fin, call.fout,
                                _share(xnnz, P))]
        else:
            gemm = [ShareKernel(call.form, _share(N, P), call.fin, call.fout)]
    return spmm, gemm


def _partition_share(g: GraphStats, P: int, f: int) -> ShareKernel:
    """For a graph this machine holds, the partition baseline's largest share of Â
    (contiguous rows, as ``--partitioner contiguous`` cuts them): its rows over its
    halo's."""
    s = _largest_share(g, P)
    return ShareKernel("spmm", s.shape[0], s.shape[1], f, int(s.nnz), s)


@functools.lru_cache(maxsize=8)
def _largest_share(g: GraphStats, P: int) -> sp.csr_array:
    """Cut once per graph and P (every SpMM of an epoch uses it)."""
    from mixgcn.host.sharding import NodePartition

    a = sp.csr_array(g.adjacency)
    part = NodePartition.build(a, P, "contiguous")
    shares = [sp.csr_array(a[r][:, c]) for r, c in zip(part.rows, part.halo_rows, strict=True)]
    return max(shares, key=lambda m: m.nnz)


def halo_rows(g: GraphStats, P: int) -> float:
    """|B_p| of a partition with no locality: each node outside a chip's N/P rows is
    reached from them with probability 1 − (1 − 1/P)^d (d: the mean degree, the
    self-loop aside) — an upper estimate for real graphs, which METIS cuts."""
    if P == 1:
        return 0.0
    d = g.mean_degree - 1
    return (g.nodes - g.nodes / P) * -math.expm1(d * math.log1p(-1 / P))


def epoch_cycles(g: GraphStats, config: ChipConfig, dims: list[tuple[int, int]], P: int = 1,
                 parallelism: str = "mop", memory: MemoryProfile = MEMORY_PROFILES["ideal"],
                 pipeline: bool = True, dropout: float = GCNConfig.dropout) -> dict:
    """The busiest chip's cycles of one epoch's kernels, per call (the exchanges
    between chips aside: :func:`project` adds them). A pair runs as the driver
    would run it: pipelined (the slower kernel's cycles and a fill) on one chip, and
    an SpMM→GEMM pair on each chip of the partition baseline, where its rows fit the
    exchange port; an SpMM beside a dense GEMM on any P (the GEMM issued after the
    SpMM's last descriptor); otherwise the two in turn (on P chips, MoP's pairs as two
    steps with an all-to-all between). ``dropout``: of the input features, which the
    layer-0 kernels see fewer of (an epoch of training; 0 for an inference pass)."""
    kc = KernelCycles(config, memory)
    L, fill = config.lanes, kc.lat.batch_end
    per_call = []
    for call in epoch_calls(dims):
        spmm, gemm = _kernels(call, g, P, parallelism, 1 - dropout)
        a = [kc.spmm(k) if k.op == "spmm" else (kc.gemm(k), 0.0) for k in spmm + gemm]
        mode = "alone"
        if len(a) == 2 and pipeline:
            if call.method == "spmm_and_gemm" and not call.sparse:
                mode = "beside"
            elif (call.method == "spmm_gemm" and (P == 1 or parallelism == "partition")
                  and call.agg <= L and call.fout <= L and call.form in ("xw", "xwt")):
                mode = "pipelined"
            elif (call.method == "gemm_spmm" and P == 1 and not call.sparse
                  and call.fout <= L and g.nodes <= config.sae.max_nodes):
                mode = "pipelined"
        if mode == "beside":  # the GEMM's descriptors issue after the SpMM's last
            (sp_cycles, sp_issued), (ge_cycles, _) = a
            cycles = max(sp_cycles, sp_issued + ge_cycles) + fill
        elif mode == "pipelined":
            cycles = max(c for c, _ in a) + fill
        else:
            cycles = sum(c for c, _ in a)
        per_call.append(dict(method=call.method, sites=list(call.sites), pairing=mode,
                             cycles=round(cycles)))
    return dict(cycles=sum(c["cycles"] for c in per_call), calls=per_call)


def limits(g: GraphStats, config: ChipConfig, dims: list[tuple[int, int]], P: int,
           parallelism: str = "mop") -> list[str]:
    """What of ``config`` the graph's share exceeds on P chips, each naming the
    parameter and the value it would need (empty: it trains as configured)."""
    sa, d = config.sae, config.dce
    out = []
    # the longest row an SpMM reduces: Â's (MoP: whole rows), Xᵀ's rows (all N nodes,
    # when the features are dense), X's rows (a node's features)
    longest = max(g.max_degree or math.ceil(g.mean_degree), g.features)
    if g.feature_nnz >= g.nodes * g.features:
        longest = max(longest, g.nodes)
    if longest > sa.max_degree:
        out.append(f"SAEConfig.max_degree >= {longest:,} (is {sa.max_degree:,}), "
                   f"acc_width >= {required_acc_width(sa.width, longest)}")
    if g.nodes > d.max_rows:
        out.append(f"DCEConfig.max_rows >= {g.nodes:,} (is {d.max_rows:,}: Xᵀ·G reduces over "
                   f"all nodes), acc_width >= {required_acc_width(d.width, g.nodes)}")
    widest = max(max(a, b) for a, b in dims)
    if widest > d.max_k:
        out.append(f"DCEConfig.max_k >= {widest} (is {d.max_k})")
    if parallelism == "partition" and P > 1 and sa.partial_rows == 0:
        out.append("SAEConfig.partial_rows > 0 (column windows)")
    return out


# ----------------------------------------------------------- bytes and memory, by proxy
def _proxy(g: GraphStats, nodes: int, seed: int = 0):
    """A small random graph with ``g``'s widths (features, classes), for the sharded
    backend to count what moves: a dataset whose every exchange has the shapes of
    ``g``'s, N rows aside."""
    from mixgcn.golden.datasets import Dataset, clean_edges, seeded_split

    rng = np.random.default_rng(seed)
    deg = max(2, min(nodes - 1, round(g.mean_degree - 1)))
    m = nodes * deg // 2
    edges = clean_edges(rng.integers(0, nodes, size=(2, m)), nodes)
    dense = g.feature_nnz >= g.nodes * g.features
    density = 1.0 if dense else g.feature_nnz / (g.nodes * g.features)
    x = sp.random(nodes, g.features, density=max(density, 1 / g.features), format="csr",
                  random_state=seed, dtype=np.float32)
    labels = np.arange(nodes) % g.classes
    train, val, test = seeded_split(labels, seed)
    return Dataset(f"proxy-{g.name}", edges, sp.csr_array(x), labels, train, val, test)


def exchange_bytes(g: GraphStats, P: int, parallelism: str = "mop", hidden: int = 16,
                   layers: int = 2, proxy_nodes: int = 0) -> dict:
    """Bytes between chips and memory per chip for one epoch of ``g`` on P chips:
    the real sharded backend (golden chips) on a proxy graph of ``g``'s widths, scaled
    from its N to ``g``'s. All-to-all and all-gather bytes scale with N; the output
    statistics' do not; the halo's are scaled by :func:`halo_rows` against the proxy's
    own halo."""
    from mixgcn.golden.backend import GoldenBackend
    from mixgcn.host.comm import InProcess
    from mixgcn.host.train import Parallel, train

    # a multiple of P (even row shares), with room for every class in the split
    n0 = proxy_nodes or P * max(32, -(-3 * g.classes // P))
    ds = _proxy(g, n0)
    r = train(ds, GCNConfig(epochs=1, hidden=hidden, layers=layers), "fixed16",
              InProcess([GoldenBackend() for _ in range(P)]),
              parallel=Parallel(P, parallelism, "contiguous"))
    t = r["epoch_traffic"][0]
    scale = g.nodes / n0
    ops = dict(t["bytes_per_op"])
    out = {k: v * scale for k, v in ops.items() if k not in ("stats", "halo")}
    out["stats"] = ops.get("stats", 0)
    if "halo" in ops:
        from mixgcn.golden.graph import normalized_adjacency
        from mixgcn.host.sharding import NodePartition

        part = NodePartition.build(normalized_adjacency(ds.edge_index, n0), P, "contiguous")
        own = sum(len(c) - len(rr) for rr, c in zip(part.rows, part.halo_rows, strict=True))
        out["halo"] = ops["halo"] / max(1, own) * halo_rows(g, P) * P
    mem = r["memory_per_chip"]
    return dict(bytes_per_op={k: round(v) for k, v in sorted(out.items())},
                bytes_total=round(sum(out.values())),
                memory_per_chip=dict(features=max(m["features"] for m in mem) * scale,
                                     weights=max(m["weights"] for m in mem)),
                proxy_nodes=n0)


# ------------------------------------------------------------------------ projection
def memory_per_chip(g: GraphStats, P: int, parallelism: str = "mop", hidden: int = 16,
                    layers: int = 2) -> dict:
    """Bytes a chip holds on P chips: the graph (MoP: all of Â, as every chip
    aggregates all N rows of its columns; partition: its rows), the features (the most
    a single step gives a chip, fitted as a/P + b to the proxy's at P = 2 and 4 and
    scaled to N: the all-gathered G of Xᵀ·G does not shrink with P) and the weights."""
    fit = _FITS.get((g, parallelism, hidden, layers))
    if fit is None:
        f2, f4 = (exchange_bytes(g, q, parallelism, hidden, layers)["memory_per_chip"]
                  for q in (2, 4))
        a = (f2["features"] - f4["features"]) * 4
        fit = _FITS[(g, parallelism, hidden, layers)] = (
            a, f2["features"] - a / 2, max(f2["weights"], f4["weights"]))
    a, b, weights = fit
    value = 2 + INDEX_BYTES  # a 16-bit value and its index, as the backend counts
    if parallelism == "mop" or P == 1:
        graph = g.nnz * value + (g.nodes + 1) * INDEX_BYTES
    else:
        graph = _share(g.nnz, P) * value + (_share(g.nodes, P) + 1) * INDEX_BYTES
    return dict(graph=round(graph), features=round(a / P + b), weights=round(weights))


_FITS: dict = {}


def project(g: GraphStats, config: ChipConfig, *, chips=(1, 2, 4, 8, 16, 32, 64),
            fmax_mhz: float, link_gbps: float = 10.0, hidden: int = 16, layers: int = 2,
            memory: MemoryProfile = MEMORY_PROFILES["ideal"],
            parallelisms=("mop", "partition"), progress=None) -> dict:
    """An epoch of ``g`` on each P of ``chips`` chips of ``config`` at ``fmax_mhz``:
    cycles (kernels and exchanges), seconds, bytes between chips, memory per chip,
    chips needed by each board's memory, and the configuration's limits. Model
    output throughout (``"kind": "model output"``)."""
    if not (isinstance(fmax_mhz, int | float) and fmax_mhz > 0):
        raise ValueError(f"fmax_mhz must be a positive clock, got {fmax_mhz!r}")
    if not (isinstance(link_gbps, int | float) and link_gbps > 0):
        raise ValueError(f"link_gbps must be positive, got {link_gbps!r}")
    bad = [P for P in chips if not (isinstance(P, int) and 1 <= P <= 4096)]
    if bad:
        raise ValueError(f"chips must be integers in 1..4096, got {bad[0]!r}")
    dims = GCNConfig(hidden=hidden, layers=layers).dims(g.features, g.classes)
    bytes_per_cycle = link_gbps * 1e9 / 8 / (fmax_mhz * 1e6)
    # the chip addresses 2**addr_width memory words (a word: a row of L lanes); the
    # bytes a chip holds are compared with that as the sharded backend counts them
    # (16-bit values, CSR with 32-bit indices), not as the chip lays them out
    address_bytes = (1 << config.addr_width) * PerfModel(config).lay.mem_width // 8
    rows = []
    for parallelism in parallelisms:
        for P in chips:
            if progress:
                progress(f"projection: {g.name} on {P} chip(s), {parallelism}")
            compute = epoch_cycles(g, config, dims, P, parallelism, memory)
            moved = (exchange_bytes(g, P, parallelism, hidden, layers) if P > 1
                     else dict(bytes_per_op={}, bytes_total=0))
            # an exchange costs its busiest link; the words are spread evenly over the
            # chips (each receives 1/P of them), which the all-to-alls and the
            # all-gather of equal shares are
            exchange = math.ceil(moved["bytes_total"] / P / bytes_per_cycle)
            mem = memory_per_chip(g, P, parallelism, hidden, layers)
            total = compute["cycles"] + exchange
            rows.append(dict(
                graph=g.name, chips=P, parallelism=parallelism,
                kernel_cycles=compute["cycles"], exchange_cycles=exchange,
                epoch_cycles=total, epoch_seconds=total / (fmax_mhz * 1e6),
                bytes_between_chips=moved["bytes_total"], bytes_per_op=moved["bytes_per_op"],
                memory_per_chip=mem, memory_per_chip_bytes=sum(mem.values()),
                fits_address_space=sum(mem.values()) <= address_bytes,
                limits=limits(g, config, dims, P, parallelism)))
    needed = {}
    for board, capacity in BOARD_MEMORY.items():
        for parallelism in parallelisms:
            cap = min(capacity, address_bytes)
            needed[f"{board}/{parallelism}"] = next(
                (1 << e for e in range(17)
                 if sum(memory_per_chip(g, 1 << e, parallelism, hidden, layers).values())
                 <= cap), None)
    return {"kind": "model output", "graph": g.name, "source": g.source,
            "nodes": g.nodes, "nnz": g.nnz, "features": g.features, "classes": g.classes,
            "dims": dims, "fmax_mhz": fmax_mhz, "link_gbps": link_gbps,
            "memory": memory.name, "address_bytes": address_bytes, "rows": rows,
            "chips_needed": needed}


def modelled_epoch(dataset, config: ChipConfig, chips: int = 1, parallelism: str = "mop",
                   memory: MemoryProfile = MEMORY_PROFILES["ideal"]) -> dict:
    """What the projection is checked against, on a graph this machine holds: the
    second epoch of a training run on ``chips`` devices of the descriptor-level model
    (:class:`~mixgcn.host.perf_model.ModelDevice`) — its kernels' cycles (the
    exchanges between chips taken out) and the bytes moved between chips."""
    from mixgcn.host.chip_driver import ChipBackend
    from mixgcn.host.comm import InProcess
    from mixgcn.host.perf_model import ModelDevice
    from mixgcn.host.train import Parallel, train

    def run(epochs):
        config_ = GCNConfig(epochs=epochs)
        if chips == 1:
            return train(dataset, config_, "fixed16",
                         ChipBackend(ModelDevice(config, memory=memory)))
        return train(dataset, config_, "fixed16",
                     InProcess([ChipBackend(ModelDevice(config, memory=memory))
                                for _ in range(chips)]),
                     parallel=Parallel(chips, parallelism, "contiguous"))

    def exchanges(r):
        return sum(v for k, v in r["cycles_per_op"].items() if k.startswith("exchange_"))

    one, two = run(1), run(2)
    # the exchanges of epoch 2: a two-epoch run's less a one-epoch run's (both end with
    # the same evaluation pass)
    kernels = two["epoch_cycles"][1] - (exchanges(two) - exchanges(one))
    moved = two["epoch_traffic"][1]["bytes_moved"] if chips > 1 else 0
    return dict(kernel_cycles=kernels, bytes_moved=moved)


def table(result: dict) -> list[str]:
    """A projection as readable lines (labelled model output)."""
    r = result
    lines = [f"{r['graph']} (model output, not measured): {r['nodes']:,} nodes, "
             f"{r['nnz']:,} non-zeros of Â, {r['features']} features, {r['classes']} "
             f"classes; GCN {' -> '.join(str(a) for a, _ in r['dims'])} -> "
             f"{r['dims'][-1][1]}; {r['fmax_mhz']:.2f} MHz, {r['link_gbps']:g} Gbit/s links, "
             f"{r['memory']} memory",
             f"  {'P':>5} {'parallelism':<10} {'kernel cycles':>14} {'exchange':>12} "
             f"{'epoch (s)':>10} {'bytes between':>15} {'memory/chip':>13}"]
    for row in r["rows"]:
        lines.append(f"  {row['chips']:>5} {row['parallelism']:<10} "
                     f"{row['kernel_cycles']:>14,} {row['exchange_cycles']:>12,} "
                     f"{row['epoch_seconds']:>10.3f} {row['bytes_between_chips']:>15,} "
                     f"{_size(row['memory_per_chip_bytes']):>13}")
    needed = ", ".join(f"{k}: {v if v else 'none up to 65,536'}"
                       for k, v in r["chips_needed"].items())
    lines.append(f"  chips needed by memory (board memory and the chip's "
                 f"{_size(r['address_bytes'])} address space): {needed}")
    lim = r["rows"][0]["limits"] if r["rows"] else []
    if lim:
        lines.append("  beyond the configuration (cycles assume these raised): "
                     + "; ".join(lim))
    return lines


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError

"""Mixture of Parallelism (and the partition-parallel baseline) across P chips.

:class:`ShardedBackend` is a :class:`~mixgcn.golden.backend.Backend` over a
:class:`~mixgcn.host.comm.Communicator` of P chips: the training loop above it does
not change, and each kernel it asks for runs as one step on every chip, each on its
share (docs/parallelism.md):

=============  ==================================  ===================================
kernel         ``mop``                             ``partition``
=============  ==================================  ===================================
SpMM ``Â·H``    chip p: ``Â · H[:, S_p]`` (all N    chip p: ``Â[R_p, C_p] · H[C_p]``
               rows, its feature columns)          (its rows; its halo's features)
``X·W``,        chip p: ``X[R_p] · W`` (W           the same
``X·Wᵀ``        replicated)
``Xᵀ·G``        chip p: ``X[:, K_p]ᵀ · G`` — rows   the same
               ``K_p`` of ``dW``, each reduced
               over all N nodes on one chip
=============  ==================================  ===================================

**Exact whatever P is.** Every output element is computed, and rounded, by exactly
one chip over its whole reduction: an SpMM column, a GEMM row, a row of a weight
gradient. No chip rounds a partial sum, so the weights do not depend on P or the
parallelism. The price is in the weight gradient: instead of an all-reduce of partial
``dW`` (which would have to travel at accumulator width), ``G`` is all-gathered
(``N × F_out`` words) and each chip reduces its rows of ``dW`` over all N nodes; that
all-gather is counted with the rest. The output stage's statistics are reduced across
chips (max of ``max|acc|``, sum of saturations), so the exponent policy sees what one
chip would.

**What moves, counted.** Each tensor a step returns lives on the chips in that step's
:class:`~mixgcn.host.sharding.Layout`; host work that is elementwise (dropout,
requantising, ReLU' masks) or row-wise (softmax) keeps it there (:meth:`derive`).
When a kernel needs a tensor in another layout, the words that change chips are
counted from the partition's sets (:func:`~mixgcn.host.sharding.transfer`): the
all-to-all between node and feature layouts, halo exchanges, all-gathers. Here the
host carries them (it reads every result and writes every operand); a fabric between
the chips would move exactly the counted words. An exchange costs the cycles its
busiest chip needs to send or receive its words over one link of ``link_gbps`` at the
chips' clock; a step costs its slowest chip's cycles.

With P = 1 every call goes to the chip as it is: the pairs stay pipelined on it.
Across chips an SpMM→GEMM pair crosses a layout switch (MoP) or a halo exchange, so
its kernels run as two steps — except partition parallelism's SpMM→GEMM, whose rows
stay on their chip and run pipelined there.
"""

from __future__ import annotations

import math
import time
import weakref

import numpy as np
import scipy.sparse as sp

from mixgcn.golden.backend import BatchRecord, DeviceReport, KernelResult, PairResult, Stage
from mixgcn.golden.fixed import OutputStats
from mixgcn.host.comm import Call, Communicator, Outcome
from mixgcn.host.sharding import (
    PARALLELISMS,
    Layout,
    NodePartition,
    column_slices,
    transfer,
)

__all__ = ["CLOCK_MHZ", "LINK_GBPS", "ShardedBackend"]

LINK_GBPS = 10.0  # one 10 Gbit/s serial lane per chip, full duplex, through a switch
CLOCK_MHZ = 100.0  # the chips' clock for link time: the simulation's 10 ns period
INDEX_BYTES = 4  # a CSR column index or row pointer
STATS_BYTES = 16  # max|acc| and the saturation count, 64 bits each

_EXCHANGE = {Layout.FULL: "allgather", Layout.HALO: "halo"}


def _csr_bytes(m, value_bytes: int) -> int:
    m = sp.csr_array(m)
    return m.nnz * (value_bytes + INDEX_BYTES) + (m.shape[0] + 1) * INDEX_BYTES


class ShardedBackend:
    """Kernels of one training loop on P chips (module docstring)."""

    def __init__(self, comm: Communicator, nodes: NodePartition, parallelism: str = "mop",
                 *, link_gbps: float = LINK_GBPS, clock_mhz: float = CLOCK_MHZ,
                 fabric=None):
        if not isinstance(comm, Communicator):
            raise TypeError(f"expected a Communicator, got {comm!r}")
        if parallelism not in PARALLELISMS:
            raise ValueError(f"unknown parallelism {parallelism!r}: expected one of "
                             f"{PARALLELISMS}")
        if nodes.parts != comm.size:
            raise ValueError(f"a partition into {nodes.parts} parts for {comm.size} chips")
        for name, v in (("link_gbps", link_gbps), ("clock_mhz", clock_mhz)):
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if fabric is not None:
            if parallelism != "mop":
                raise ValueError("the exchange fabric carries Mixture of Parallelism's "
                                 f"all-to-all; parallelism {parallelism!r} needs the host's")
            if nodes.method != "cyclic":
                raise ValueError("the exchange fabric interleaves rows: it needs the cyclic "
                                 f"node partition, got {nodes.method!r}")
        # a SimulatedSystem: SpMM→GEMM and GEMM→SpMM pairs cross its fabric
        self.fabric = fabric
        self.comm, self.nodes, self.parallelism = comm, nodes, parallelism
        self.P, self.N = comm.size, nodes.nodes
        self.name, self.fmt = comm.name, comm.fmt
        self.link_gbps, self.clock_mhz = float(link_gbps), float(clock_mhz)
        self.word_bytes = self.fmt.width / 8
        self._homes: dict[int, tuple[weakref.ref, set[Layout]]] = {}
        self._graph: dict[int, tuple[weakref.ref, list]] = {}  # id(Â) -> its shards
        self.kernel_runs = 0
        self.steps: list[BatchRecord] = []
        self.timed = True  # False once a chip reports no cycles (the functional model)
        self.cycles_per_chip = np.zeros(self.P, dtype=np.int64)
        self.bytes_per_chip = np.zeros(self.P)  # received
        self.bytes_per_op: dict[str, float] = {}
        self.bytes_per_layer: dict[str, float] = {}
        self.exchanges = 0
        self.exchange_cycles = 0
        self.formula_bytes = 0.0  # the same exchanges by docs/parallelism.md's formulas
        self.fabric_bytes = 0.0  # carried by the fabric's links between chips, counted there
        self.fabric_steps: list[dict] = []
        self.words = [0, 0]  # written, read by the host (over all chips)
        self.seconds = 0.0
        self.memory = [dict(graph=0, features=0, weights=0) for _ in range(self.P)]

    # ------------------------------------------------------------- the protocol
    def spmm(self, s, x, stage: Stage, *, site: str = "") -> KernelResult:
        if self.P == 1:
            return self._whole("spmm", (s, x, stage), dict(site=site))
        part = self._spmm_part(s, x, stage, site)
        out = self._run([part], "spmm", (site,))
        return out[0]

    def gemm(self, form: str, x, w, stage: Stage, *, site: str = "") -> KernelResult:
        if self.P == 1:
            return self._whole("gemm", (form, x, w, stage), dict(site=site))
        part = self._gemm_part(form, x, w, stage, site)
        return self._run([part], f"gemm_{form}", (site,))[0]

    def spmm_gemm(self, s, x, form, w, stages, *, sites=("", "")) -> PairResult:
        if self.P == 1:
            return self._whole("spmm_gemm", (s, x, form, w, stages), dict(sites=sites))
        if self._across(x, form, w):
            return self._fabric_spmm_gemm(s, x, form, w, stages, sites)
        if self.parallelism == "partition" and form in ("xw", "xwt"):
            return self._partition_spmm_gemm(s, x, form, w, stages, sites)
        a = self.spmm(s, x, stages[0], site=sites[0])
        return PairResult(a, self.gemm(form, a.rows, w, stages[1], site=sites[1]))

    def gemm_spmm(self, form, x, w, s, stages, *, sites=("", "")) -> PairResult:
        if self.P == 1:
            return self._whole("gemm_spmm", (form, x, w, s, stages), dict(sites=sites))
        if self._across(x, form, w, out=True):
            return self._fabric_gemm_spmm(form, x, w, s, stages, sites)
        t = self.gemm(form, x, w, stages[0], site=sites[0])
        return PairResult(t, self.spmm(s, t.rows, stages[1], site=sites[1]))

    def spmm_and_gemm(self, s, h, form, x, w, stages, *, sites=("", "")) -> PairResult:
        """One step: chip p runs its share of the SpMM beside its share of the GEMM."""
        if self.P == 1:
            return self._whole("spmm_and_gemm", (s, h, form, x, w, stages),
                               dict(sites=sites))
        first = self._spmm_part(s, h, stages[0], sites[0])
        second = self._gemm_part(form, x, w, stages[1], sites[1])
        a, b = self._run([first, second], f"spmm|gemm_{form}", tuple(sites))
        return PairResult(a, b)

    def derive(self, new, source, *, rowwise: bool = False, site: str = "") -> None:
        """``new`` was made on the host from ``source`` (a tensor this backend returned)
        elementwise, or row by row (``rowwise``): it lives where ``source`` lives — for a
        row-wise result, in the node layout, which costs an all-to-all if ``source`` is
        held by features."""
        held = self._held(source)
        if held is None or new is None:
            return
        if rowwise:
            self._need(source, Layout.NODE, site)
            held = {Layout.NODE}
        self._register(new, set(held))
        if new.dtype != bool:  # its exponent: the largest magnitude, reduced over chips
            self._count("stats", site, np.zeros(self.P), 8 * self.P)

    def report(self) -> DeviceReport:
        reports = self.comm.reports()
        cycles = None
        if self.timed:
            cycles = sum(b.cycles for b in self.steps)
        return DeviceReport(
            backend=self.name, kernel_runs=self.kernel_runs, cycles=cycles,
            batches=list(self.steps), words_written=self.words[0], words_read=self.words[1],
            device_seconds=self.seconds, chip=reports[0].chip,
            memory_counted=all(r.memory_counted for r in reports),
            distinct_counted=all(r.distinct_counted for r in reports),
            parallel=dict(self._traffic(),
                          kernel_runs_per_chip=[r.kernel_runs for r in reports],
                          transport=self.comm.transport))

    def close(self) -> None:
        self.comm.close()

    # ------------------------------------------------------------------ shares
    # A part is (calls, assemble): per chip the (method, args) of its share, or None,
    # and a function from the chips' results to the whole KernelResult.
    def _spmm_part(self, s, x, stage: Stage, site: str):
        x = x if sp.issparse(x) else np.asarray(x)  # sparse: layer 0's features
        self._need(stage.mask, Layout.FEATURE if self.parallelism == "mop" else Layout.NODE,
                   site)
        shards = self._adjacency(s)
        shape = (s.shape[0], x.shape[1])
        if self.parallelism == "mop":  # feature-parallel: all N rows of S_p
            self._need(x, Layout.FEATURE, site)
            cols = column_slices(x.shape[1], self.P)
            calls = [("spmm", (shards[p], _columns(x, c), self._stage(stage, None, c)))
                     if len(c) else None for p, c in enumerate(cols)]
            for p, c in enumerate(cols):
                self._hold(p, features=self._bytes(_columns(x, c)))
            return calls, lambda rs: self._by_columns(rs, cols, shape, Layout.FEATURE)
        self._need(x, Layout.HALO, site)  # partition: rows R_p, reading the halo C_p
        rows, halo = self.nodes.rows, self.nodes.halo_rows
        calls = [("spmm", (shards[p], x[halo[p]], self._stage(stage, rows[p], None)))
                 for p in range(self.P)]
        for p in range(self.P):
            self._hold(p, features=self._bytes(x[halo[p]]))
        return calls, lambda rs: self._by_rows(rs, rows, shape, Layout.NODE)

    def _gemm_part(self, form: str, x, w, stage: Stage, site: str):
        if form == "xtg":  # rows K_p of dW, each over all N nodes: no partial sums
            self._need(x, Layout.FEATURE, site)
            self._need(w, Layout.FULL, site)
            ks = column_slices(x.shape[1], self.P)
            calls = [("gemm", ("xtg", _columns(x, k), w, self._stage(stage, k, None)))
                     if len(k) else None for k in ks]
            for p, k in enumerate(ks):
                self._hold(p, features=self._bytes(_columns(x, k)) + self._bytes(w))
            shape = (x.shape[1], np.shape(w)[1])
            return calls, lambda rs: self._by_rows(rs, ks, shape, None)
        rows = self._row_split(x.shape[0])
        self._need(x, Layout.NODE, site)
        self._need(stage.mask, Layout.NODE, site)
        calls = [("gemm", (form, x[r], w, self._stage(stage, r, None))) if len(r) else None
                 for r in rows]
        for p, r in enumerate(rows):
            self._hold(p, features=self._bytes(x[r]), weights=self._bytes(w))
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        layout = Layout.NODE if x.shape[0] == self.N else None
        return calls, lambda rs: self._by_rows(rs, rows, (x.shape[0], m), layout)

    def _partition_spmm_gemm(self, s, x, form, w, stages, sites) -> PairResult:
        """Partition parallelism: chip p's SpMM rows are its GEMM's rows, so each chip
        runs the pair pipelined on its own share."""
        x = x if sp.issparse(x) else np.asarray(x)
        self._need(x, Layout.HALO, sites[0])
        self._need(stages[1].mask, Layout.NODE, sites[1])
        shards = self._adjacency(s)
        rows, halo = self.nodes.rows, self.nodes.halo_rows
        calls = [("spmm_gemm", (shards[p], x[halo[p]], form, w,
                                (self._stage(stages[0], rows[p], None),
                                 self._stage(stages[1], rows[p], None))), dict(sites=sites))
                 for p in range(self.P)]
        for p in range(self.P):
            self._hold(p, features=self._bytes(x[halo[p]]), weights=self._bytes(w))
        outcomes = self._step(calls, f"spmm+gemm_{form}", tuple(sites), "pipelined")
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        a = self._by_rows([o.result.first if o else None for o in outcomes], rows,
                          (s.shape[0], x.shape[1]), Layout.NODE)
        z = self._by_rows([o.result.second if o else None for o in outcomes], rows,
                          (s.shape[0], m), Layout.NODE)
        self.kernel_runs += 2
        return PairResult(a, z)

    # ------------------------------------------------------------ the fabric
    def _across(self, x, form: str, w, *, out: bool = False) -> bool:
        """Whether a pair runs across the fabric: a system with one, a dense X, rows
        that cross as one word (the tensor that crosses at most ``lanes`` wide) and at
        least one lane per chip. Otherwise the pair runs as two steps and the host
        carries the exchange."""
        if self.fabric is None or sp.issparse(x) or form not in ("xw", "xwt"):
            return False
        L = self.fabric.system.chip.lanes
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        k = np.shape(x)[1]
        crossing = m if out else k
        # a GEMM→SpMM fills the SAE's buffer from the fabric: all N rows must fit it (in
        # column windows the host writes each window's rows)
        fits = not out or self.N <= self.fabric.system.chip.sae.max_nodes
        return (self.P <= crossing <= L and m <= L and k <= (self.fabric.config.dce.max_k)
                and np.shape(x)[0] == self.N and fits)

    def _route(self, mode: str, columns: int):
        cols = column_slices(columns, self.P)
        return cols, dict(mode=mode, lo=[int(c[0]) for c in cols], count=[len(c) for c in cols])

    def _fabric_step(self, calls, kind, sites):
        flits0, bytes0 = self.fabric.link_flits.copy(), self.fabric.link_bytes()
        outcomes = self._step(calls, kind, tuple(sites), "fabric")
        flits = self.fabric.link_flits - flits0
        moved = self.fabric.link_bytes() - bytes0
        np.fill_diagonal(moved, 0)  # a chip's link to itself stays on the chip
        self._count("fabric", sites[0], moved.sum(axis=0), moved.sum())
        self.fabric_bytes += moved.sum()
        self.kernel_runs += 2
        if self.timed:
            # what bounds the step: each chip's engines (busy cycles) and the busiest
            # link (a flit a cycle at most)
            self.fabric_steps.append(dict(
                kind=kind, sites=list(sites), cycles=self.steps[-1].cycles,
                sae_busy=[o.batches[-1].sae_busy for o in outcomes],
                dce_busy=[o.batches[-1].dce_busy for o in outcomes],
                link_flits=int(flits.max())))
        return outcomes

    def _fabric_spmm_gemm(self, s, x, form, w, stages, sites) -> PairResult:
        """MoP's SpMM→GEMM across the fabric: chip p aggregates its columns ``S_p`` of
        every row, the fabric sends row r to chip r mod P, which combines it as soon as
        all P slices are in (hdl/fabric.py, scatter)."""
        x = np.asarray(x)
        self._need(x, Layout.FEATURE, sites[0])
        self._need(stages[0].mask, Layout.FEATURE, sites[0])
        self._need(stages[1].mask, Layout.NODE, sites[1])
        cols, route = self._route("scatter", x.shape[1])
        rows = self.nodes.rows
        shards = self._adjacency(s)
        calls = []
        for p, c in enumerate(cols):
            mine = np.zeros_like(x)
            mine[:, c] = x[:, c]
            calls.append(Call("spmm_gemm_fabric",
                              (shards[p], mine, form, w,
                               (stages[0], self._stage(stages[1], rows[p], None))),
                              dict(rows=len(rows[p]), route=route, sites=tuple(sites))))
            self._hold(p, features=self._bytes(x[:, c]), weights=self._bytes(w))
        outcomes = self._fabric_step(calls, f"spmm+gemm_{form}", sites)
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        a = self._by_columns([_lanes(o.result.first, c) for o, c in
                              zip(outcomes, cols, strict=True)], cols, x.shape,
                             Layout.FEATURE)
        z = self._by_rows([o.result.second for o in outcomes], rows, (self.N, m), Layout.NODE)
        return PairResult(a, z)

    def _fabric_gemm_spmm(self, form, x, w, s, stages, sites) -> PairResult:
        """MoP's GEMM→SpMM across the fabric: chip q combines its rows ``R_q``, the
        fabric gives every chip each row in row order, its lanes ``S_p`` only, and chip
        p aggregates them as they arrive (hdl/fabric.py, gather)."""
        x = np.asarray(x)
        self._need(x, Layout.NODE, sites[0])
        self._need(stages[0].mask, Layout.NODE, sites[0])
        self._need(stages[1].mask, Layout.FEATURE, sites[1])
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        cols, route = self._route("gather", m)
        rows = self.nodes.rows
        shards = self._adjacency(s)
        calls = [Call("gemm_spmm_fabric",
                      (form, x[rows[p]], w, shards[p],
                       (self._stage(stages[0], rows[p], None), stages[1])),
                      dict(route=route, sites=tuple(sites))) for p in range(self.P)]
        for p in range(self.P):
            self._hold(p, features=self._bytes(x[rows[p]]), weights=self._bytes(w))
        outcomes = self._fabric_step(calls, f"gemm_{form}+spmm", sites)
        t = self._by_rows([o.result.first for o in outcomes], rows, (self.N, m), Layout.NODE)
        z = self._by_columns([_lanes(o.result.second, c) for o, c in
                              zip(outcomes, cols, strict=True)], cols, (s.shape[0], m),
                             Layout.FEATURE)
        return PairResult(t, z)

    # --------------------------------------------------------------- execution
    def _whole(self, method: str, args: tuple, kwargs: dict):
        """P = 1: the call as it is, on the one chip."""
        outcome = self._step([Call(method, args, kwargs)], method, _sites(kwargs), "alone")[0]
        self.kernel_runs += 1 if method in ("spmm", "gemm") else 2
        return outcome.result

    def _run(self, parts: list, kind: str, sites: tuple[str, ...]) -> list[KernelResult]:
        """One step running every part on every chip; each part's assembled result."""
        calls: list[Call | None] = []
        for p in range(self.P):
            mine = [part[0][p] for part in parts]
            given = [c for c in mine if c is not None]
            if not given:
                calls.append(None)
            elif len(given) == 1 and len(parts) == 1:
                calls.append(Call(given[0][0], given[0][1], dict(site=sites[0])))
            elif len(given) == 1:  # a chip with a share of one kernel of a pair only
                i = next(k for k, c in enumerate(mine) if c is not None)
                calls.append(Call(given[0][0], given[0][1], dict(site=sites[i])))
            else:  # its shares of both: the SpMM beside the GEMM
                (_, (s, h, st1)), (_, (form, x, w, st2)) = mine
                calls.append(Call("spmm_and_gemm", (s, h, form, x, w, (st1, st2)),
                                  dict(sites=sites)))
        outcomes = self._step(calls, kind, sites, "beside" if len(parts) > 1 else "alone")
        results = []
        for i, (shares, assemble) in enumerate(parts):
            per_chip = []
            for p, o in enumerate(outcomes):
                if shares[p] is None or o is None:
                    per_chip.append(None)
                elif isinstance(o.result, PairResult):
                    per_chip.append(o.result.first if i == 0 else o.result.second)
                else:
                    per_chip.append(o.result)
            results.append(assemble(per_chip))
        self.kernel_runs += len(parts)
        return results

    def _step(self, calls: list, kind: str, sites: tuple[str, ...],
              pairing: str) -> list[Outcome | None]:
        calls = [Call(*c) if isinstance(c, tuple) else c for c in calls]
        t0 = time.perf_counter()
        outcomes = self.comm.map(calls)
        self.seconds += time.perf_counter() - t0
        if self.P == 1:  # one chip: its own records, as they are
            o = outcomes[0]
            self.words[0] += o.words_written
            self.words[1] += o.words_read
            if o.cycles is None:
                self.timed = False
            else:
                self.cycles_per_chip[0] += o.cycles
                self.steps.extend(o.batches)
            return outcomes
        # moved: every chip's memory words and buffer loads (and the rows they loaded)
        cycles, busy, moved = [], [0, 0], [0, 0, 0, 0, 0]
        for p, o in enumerate(outcomes):
            if o is None:
                continue
            self.words[0] += o.words_written
            self.words[1] += o.words_read
            if o.cycles is None:
                self.timed = False
                continue
            self.cycles_per_chip[p] += o.cycles
            cycles.append(o.cycles)
            for b in o.batches:
                busy[0] += b.sae_busy
                busy[1] += b.dce_busy
                moved[0] += b.memory_reads
                moved[1] += b.memory_writes
                moved[2] += b.memory_distinct_reads
                moved[3] += b.buffer_loads
                moved[4] += b.buffer_rows_loaded
        if self.timed:
            self.steps.append(BatchRecord(kind=kind, sites=sites, pairing=pairing,
                                          cycles=max(cycles, default=0), sae_busy=busy[0],
                                          dce_busy=busy[1], memory_reads=moved[0],
                                          memory_writes=moved[1],
                                          memory_distinct_reads=moved[2],
                                          buffer_loads=moved[3],
                                          buffer_rows_loaded=moved[4]))
        # the output stage's statistics, reduced across the chips that ran
        self._count("stats", sites[0], np.zeros(self.P),
                    STATS_BYTES * sum(o is not None for o in outcomes))
        return outcomes

    # ------------------------------------------------------------ assembling
    def _by_columns(self, results, cols, shape, layout) -> KernelResult:
        out = np.zeros(shape, dtype=np.int64)
        for r, c in zip(results, cols, strict=True):
            if r is not None:
                out[:, c] = r.rows
        return self._result(out, results, layout)

    def _by_rows(self, results, rows, shape, layout) -> KernelResult:
        out = np.zeros(shape, dtype=np.int64)
        for res, r in zip(results, rows, strict=True):
            if res is not None:
                out[r] = res.rows
        return self._result(out, results, layout)

    def _result(self, out, results, layout) -> KernelResult:
        stats = [r.stats for r in results if r is not None]
        merged = OutputStats(max_abs=max((s.max_abs for s in stats), default=0),
                             saturated=sum(s.saturated for s in stats))
        if layout is not None:
            self._register(out, {layout})
        return KernelResult(out, merged)

    # ------------------------------------------------------------------ shards
    def _adjacency(self, s) -> list:
        """Each chip's share of the graph: all of it (MoP), or its rows over its halo's
        columns (partition) — cut once per matrix."""
        key = id(s)
        hit = self._graph.get(key)
        if hit is not None and hit[0]() is s:
            return hit[1]
        csr = sp.csr_array(s)
        if self.parallelism == "mop":
            shards = [s] * self.P
        else:
            if csr.shape[0] != self.N:
                raise ValueError(f"an SpMM over {csr.shape[0]} rows on a partition of "
                                 f"{self.N} nodes")
            shards = [csr[r][:, c] for r, c in zip(self.nodes.rows, self.nodes.halo_rows,
                                                    strict=True)]
        for p, m in enumerate(shards):
            self._hold(p, graph=_csr_bytes(m, math.ceil(self.word_bytes)))
        self._graph = {k: v for k, v in self._graph.items() if v[0]() is not None}
        self._graph[key] = (weakref.ref(s), shards)
        return shards

    def _row_split(self, n: int) -> list[np.ndarray]:
        return list(self.nodes.rows) if n == self.N else column_slices(n, self.P)

    @staticmethod
    def _stage(stage: Stage, rows, cols) -> Stage:
        if stage.mask is None:
            return stage
        m = stage.mask
        if rows is not None:
            m = m[rows]
        if cols is not None:
            m = m[:, cols]
        return Stage(stage.shift, stage.relu, m)

    def _bytes(self, a) -> float:
        if sp.issparse(a):
            return _csr_bytes(a, math.ceil(self.word_bytes))
        return np.size(a) * self.word_bytes

    def _hold(self, p: int, **sizes) -> None:
        for k, v in sizes.items():
            self.memory[p][k] = max(self.memory[p][k], math.ceil(float(v)))

    # ---------------------------------------------------------------- traffic
    def _held(self, a) -> set[Layout] | None:
        if a is None or sp.issparse(a):
            return None
        home = self._homes.get(id(a))
        return home[1] if home is not None and home[0]() is a else None

    def _register(self, a, layouts: set[Layout]) -> None:
        if len(self._homes) > 256:
            self._homes = {k: v for k, v in self._homes.items() if v[0]() is not None}
        self._homes[id(a)] = (weakref.ref(a), layouts)

    def _need(self, a, need: Layout, site: str) -> None:
        """Count what it takes to have ``a`` in layout ``need`` (nothing for a tensor
        the host made: the host writes every operand anyway)."""
        held = self._held(a)
        if held is None or need in held or Layout.FULL in held:
            return
        shape = np.shape(a)
        bits = 1 if np.asarray(a).dtype == bool else self.fmt.width
        # the cheapest source, then the one whose busiest chip moves least; ties by
        # the layouts' order, so every process picks the same
        order = list(Layout)
        moves = min((transfer(h, need, shape, self.nodes)
                     for h in sorted(held, key=order.index)),
                    key=lambda m: (m.sum(), max(m.sum(0).max(), m.sum(1).max())))
        moved = moves * (bits / 8)
        kind = _EXCHANGE.get(need, "alltoall")
        self._count(kind, site, moved.sum(axis=0), moved.sum())
        rows, cols = shape
        P = self.P
        self.formula_bytes += bits / 8 * {
            "alltoall": rows * cols * (P - 1) / P,  # MixGCN's all-to-all
            "allgather": rows * cols * (P - 1),
            "halo": sum(len(c) - len(r) for r, c in zip(self.nodes.rows, self.nodes.halo_rows,
                                                        strict=True)) * cols,  # Σ|B_p|·F
        }[kind]
        busiest = max(moved.sum(axis=0).max(), moved.sum(axis=1).max())
        bytes_per_cycle = self.link_gbps * 1e9 / 8 / (self.clock_mhz * 1e6)
        cycles = math.ceil(busiest / bytes_per_cycle)
        self.exchanges += 1
        self.exchange_cycles += cycles
        if self.timed:
            self.steps.append(BatchRecord(kind=f"exchange_{kind}", sites=(site,),
                                          pairing="alone", cycles=cycles, sae_busy=0,
                                          dce_busy=0))
        held.add(need)

    def _count(self, kind: str, site: str, received: np.ndarray, total: float) -> None:
        self.bytes_per_chip += received
        self.bytes_per_op[kind] = self.bytes_per_op.get(kind, 0) + total
        layer = site.split(".")[0] if site else "host"
        self.bytes_per_layer[layer] = self.bytes_per_layer.get(layer, 0) + total

    def _traffic(self) -> dict:
        """The JSON keys of a run on P chips (docs/parallelism.md)."""
        return dict(
            chips=self.P, parallelism=self.parallelism, partitioner=self.nodes.method,
            exchange="host" if self.fabric is None else "fabric",
            fabric=None if self.fabric is None else self.fabric.system.fabric.to_dict(),
            fabric_bytes=round(self.fabric_bytes),
            fabric_steps=list(self.fabric_steps),
            link_gbps=self.link_gbps, clock_mhz=self.clock_mhz,
            bytes_moved=round(float(sum(self.bytes_per_op.values()))),
            bytes_per_chip=[round(float(b)) for b in self.bytes_per_chip],
            bytes_per_op={k: round(float(v)) for k, v in sorted(self.bytes_per_op.items())},
            bytes_per_layer={k: round(float(v)) for k, v in sorted(self.bytes_per_layer.items())},
            formula_bytes=round(self.formula_bytes),
            exchanges=self.exchanges,
            exchange_cycles=self.exchange_cycles if self.timed else None,
            cycles_per_chip=[int(c) for c in self.cycles_per_chip] if self.timed else None,
            memory_per_chip=[dict(m) for m in self.memory],
        )


def _lanes(result: KernelResult, cols) -> KernelResult:
    """A chip's result across the fabric holds every column, zero but its own."""
    return KernelResult(result.rows[:, cols], result.stats)


def _columns(x, k):
    return sp.csr_array(x)[:, k] if sp.issparse(x) else x[:, k]


def _sites(kwargs: dict) -> tuple[str, ...]:
    return tuple(kwargs["sites"]) if "sites" in kwargs else (kwargs.get("site", ""),)

"""The RTL backend: the backend protocol on a chip, every kernel a batch of descriptors.

:class:`ChipBackend` implements :class:`~mixgcn.golden.backend.Backend` on any
:class:`~mixgcn.host.device.ChipDevice` (a simulated chip, later a board). Each call
lays its operands out in the chip's memory, writes them in bulk, runs one batch of
descriptors (docs/architecture.md, "Descriptors") and reads the output rows back;
the status records give the output stage's statistics, so the host's exponent policy
sees exactly what it sees on the golden backend.

Sparse operands go to the SAE (``Â·H``; ``X·W`` and ``Xᵀ·G`` when the features are
sparse), dense ones to the DCE. An SpMM and the GEMM its rows feed (or that feeds it)
run as one pipelined batch, and an SpMM and an unrelated GEMM as one batch on both
engines at once; ``pipeline=False`` runs every kernel alone, to measure the gain.

**Memory map.** Each batch's dense operands, masks and outputs go from address 0 up
(the lower half of memory). Sparse matrices, kept across batches (the adjacency
serves every layer and epoch), go from the top down (the upper half); when it is
full, the kept ones are forgotten and written again on their next use.

:func:`plan_training` runs a whole training step through this driver on a
:class:`PlanningDevice`, which executes nothing: every limit of the chip is checked
with the same code that lays out a real run, before anything is built.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.sparse as sp

from mixgcn.gen.config import ChipConfig
from mixgcn.golden.backend import (
    BatchRecord,
    DeviceReport,
    KernelResult,
    NumberFormat,
    PairResult,
    Stage,
    longest_row,
)
from mixgcn.golden.fixed import OutputStats
from mixgcn.hdl.chip import ChipLayouts, Unit
from mixgcn.hdl.dce import DCEOp
from mixgcn.host.device import (
    TIMEOUTS,
    BatchResult,
    ChipDevice,
    ChipError,
    DeviceError,
    StatusRecord,
)
from mixgcn.host.packing import (
    csr_beat_arrays,
    csr_beat_count,
    from_ints,
    pack,
    to_ints,
    unpack_signed,
    weight_words,
)
from mixgcn.host.tiling import plan_windows

__all__ = ["SAE_KINDS", "Batch", "ChipBackend", "PlanningDevice", "plan_training"]

_FORMS = {"xw": DCEOp.XW, "xwt": DCEOp.XWT, "xtg": DCEOp.XTG}

# the kernel kinds (BatchRecord.kind) that run on the sparse engine; the others run on
# the dense one
SAE_KINDS = frozenset({"spmm", "gemm_xw_sparse", "gemm_xtg_sparse"})


def _tiles(a, lanes: int, tiles: int) -> np.ndarray:
    """``a`` [rows, ≤ tiles·lanes] as ``tiles`` blocks of ``lanes`` columns one after
    the other, zero-padded: [tiles · rows, lanes] (the order passes and tiles read)."""
    a = np.asarray(a)
    padded = np.zeros((a.shape[0], tiles * lanes), dtype=a.dtype)
    padded[:, :a.shape[1]] = a
    return padded.reshape(a.shape[0], tiles, lanes).transpose(1, 0, 2).reshape(-1, lanes)


def _dense(x) -> np.ndarray:
    """A dense int64 operand (the SAE's buffer holds dense rows, even of sparse X)."""
    return (x.toarray() if sp.issparse(x) else np.asarray(x)).astype(np.int64, copy=False)


def _stats(res: BatchResult, unit: Unit) -> OutputStats:
    recs = [s for s in res.status if s.unit == unit]
    return OutputStats(max_abs=max((s.max_abs for s in recs), default=0),
                       saturated=sum(s.saturated for s in recs))


class Batch:
    """A batch being laid out: scratch space from address 0, the writes it needs
    (``(address, words)``) and its descriptors (packed)."""

    def __init__(self, backend: ChipBackend):
        self.backend, self.top = backend, 0
        self.loads = self.rows_loaded = 0  # the SAE's buffer loads and the rows they load
        self.first_rows_out = 0  # the index in descs of the first SPMM whose rows leave
        self.writes: list[tuple[int, np.ndarray]] = []
        self.descs: list[int] = []

    def alloc(self, n: int, what: str) -> int:
        addr, self.top = self.top, self.top + n
        half = self.backend.capacity // 2
        if self.top > half:
            raise ValueError(f"{what}: the batch's operands and results need {self.top} "
                             f"memory words; the lower half of the chip's memory holds "
                             f"{half} (ChipConfig.addr_width={self.backend.config.addr_width})")
        return addr

    def put(self, words: np.ndarray, what: str) -> int:
        addr = self.alloc(len(words), what)
        self.writes.append((addr, words))
        return addr

    def desc(self, unit: Unit, **fields) -> None:
        self.descs.append(self.backend.descriptor(unit, **fields))


class ChipBackend:
    """The :class:`~mixgcn.golden.backend.Backend` protocol on one chip device."""

    def __init__(self, device: ChipDevice, *, pipeline: bool = True):
        self.device = device
        # what runs the chip ("rtl": a simulated chip; "board": one behind its link)
        self.name = getattr(device, "backend", "rtl")
        self.config: ChipConfig = device.config
        self.lay = ChipLayouts(self.config)
        self.L = self.config.lanes
        self.width = self.config.sae.width
        self.fmt = NumberFormat(width=self.width, acc_width=self.config.sae.acc_width)
        # the words the device's memory holds: the chip's address space, or less (a
        # DRAM smaller than it)
        self.capacity = getattr(device, "capacity", 1 << self.config.addr_width)
        self.mem_bytes = -(-self.lay.mem_width // 8)
        self.desc_bytes = -(-self.lay.desc_layout.size // 8)
        self.pipeline = pipeline  # False: every kernel alone (to measure the pipeline)
        self.follow = True  # an SpMM trails its LOAD (False only to test that it may not)
        self._report = DeviceReport(backend=self.name, cycles=0, chip=self.config.to_dict(),
                                    memory_counted=getattr(device, "counts_memory", True),
                                    distinct_counted=getattr(device, "counts_distinct_reads",
                                                             True))
        # sparse operands kept in the upper half: content hash -> (address, beats)
        self._kept: dict[str, tuple[int, int]] = {}
        self._kept_base = self.capacity
        self._batch_kept: set[str] = set()
        self._sites: tuple[str, ...] = ()  # the model's operations the next batch serves
        self._loads = (0, 0)  # the last batch's buffer loads and rows loaded

    # ------------------------------------------------------------------ protocol
    def spmm(self, s, x, stage: Stage, *, site: str = "") -> KernelResult:
        self._sites = (site,)
        out, res = self.run_spmm(s, x, stage)
        self._record("spmm", (site,), "alone", res)
        return out

    def gemm(self, form: str, x, w, stage: Stage, *, site: str = "") -> KernelResult:
        self._sites = (site,)
        if sp.issparse(x):  # sparse features: the SAE serves X·W and Xᵀ·G
            if form == "xw":
                out, res = self.run_spmm(x, w, stage)
            elif form == "xtg":
                out, res = self.run_spmm(sp.csr_array(x.T), w, stage)
            else:
                raise ValueError(f"GEMM {form} with a sparse left operand is not supported")
            self._record(f"gemm_{form}_sparse", (site,), "alone", res)
            return out
        out, res = self.run_gemm(form, x, w, stage)
        self._record(f"gemm_{form}", (site,), "alone", res)
        return out

    def spmm_gemm(self, s, x, form, w, stages, *, sites=("", "")) -> PairResult:
        """The fine-grain pipeline when A's rows fit the exchange port (F ≤ lanes) and
        the product one tile; otherwise the two kernels in turn."""
        m = w.shape[1] if form == "xw" else w.shape[0]
        if (not self.pipeline or x.shape[1] > self.L or m > self.L
                or form not in ("xw", "xwt")):
            a = self.spmm(s, x, stages[0], site=sites[0])
            return PairResult(a, self.gemm(form, a.rows, w, stages[1], site=sites[1]))
        self._sites = tuple(sites)
        pair, res = self.run_spmm_gemm(s, x, form, w, stages)
        self._record(f"spmm+gemm_{form}", sites, "pipelined", res)
        return pair

    def gemm_spmm(self, form, x, w, s, stages, *, sites=("", "")) -> PairResult:
        """The DCE→SAE pipeline when X is dense, T one tile and S gathers from no more
        rows than the SAE's buffer holds (T's rows fill it); otherwise in turn."""
        m = w.shape[1] if form == "xw" else w.shape[0]
        if (not self.pipeline or sp.issparse(x) or m > self.L
                or form not in ("xw", "xwt") or s.shape[1] > self.config.sae.max_nodes):
            t = self.gemm(form, x, w, stages[0], site=sites[0])
            return PairResult(t, self.spmm(s, t.rows, stages[1], site=sites[1]))
        self._sites = tuple(sites)
        pair, res = self.run_gemm_spmm(form, x, w, s, stages)
        self._record(f"gemm_{form}+spmm", sites, "pipelined", res)
        return pair

    def spmm_and_gemm(self, s, h, form, x, w, stages, *, sites=("", "")) -> PairResult:
        """An SpMM and an unrelated dense GEMM in one batch, one on each engine."""
        if not self.pipeline or sp.issparse(x):
            return PairResult(self.spmm(s, h, stages[0], site=sites[0]),
                              self.gemm(form, x, w, stages[1], site=sites[1]))
        self._sites = tuple(sites)
        pair, res = self.run_spmm_and_gemm(s, h, form, x, w, stages)
        self._record(f"spmm|gemm_{form}", sites, "beside", res)
        return pair

    def derive(self, new, source, *, rowwise: bool = False, site: str = "") -> None:
        pass  # one chip: the host writes every operand it needs

    # -------------------------------------------- one chip's share across a fabric
    def spmm_gemm_fabric(self, s, x, form, w, stages, *, rows: int, route: dict,
                         sites=("", "")) -> PairResult:
        """This chip's part of an SpMM→GEMM pair across a system's fabric
        (:mod:`mixgcn.hdl.fabric`, scatter): ``S·X`` over every row, ``x`` zero outside
        this chip's lanes, each row sent to its owner; the GEMM on the ``rows`` rows
        the fabric brings this chip (its own, merged from every chip's lanes)."""
        self._sites = tuple(sites)
        pair, res = self.run_spmm_gemm(s, x, form, w, stages, rows=rows, fabric=route)
        self._record(f"spmm+gemm_{form}", sites, "fabric", res)
        return pair

    def gemm_spmm_fabric(self, form, x, w, s, stages, *, route: dict,
                         sites=("", "")) -> PairResult:
        """This chip's part of a GEMM→SpMM pair across a system's fabric (gather):
        ``T = X·W`` on this chip's rows ``x``, each row sent to every chip; ``S·T`` on
        every row the fabric brings, in row order, this chip's lanes of them."""
        self._sites = tuple(sites)
        pair, res = self.run_gemm_spmm(form, x, w, s, stages, fabric=route)
        self._record(f"gemm_{form}+spmm", sites, "fabric", res)
        return pair

    def report(self) -> DeviceReport:
        return self._report

    def close(self) -> None:
        self.device.close()

    # ------------------------------------------------------------ batches, by kind
    # Each returns the kernel results and the BatchResult (cycles, status, counters).
    def layout_spmm(self, s, x, stage: Stage) -> tuple[Batch, int, int]:
        """The batch of ``S · X`` without running it: (batch, output address, passes)."""
        b = Batch(self)
        return (b, *self._spmm(b, s, _dense(x), stage, follow=self.follow))

    def run_spmm(self, s, x, stage: Stage) -> tuple[KernelResult, BatchResult]:
        """``S · X`` through the output stage, in ⌈F/L⌉ passes."""
        x = _dense(x)
        b, out, passes = self.layout_spmm(s, x, stage)
        res = self._execute(b, f"SpMM {s.shape[0]}x{s.shape[1]} · {x.shape[1]} columns")
        rows = self._gather(out, passes, s.shape[0], x.shape[1])
        return KernelResult(rows, _stats(res, Unit.SPMM)), res

    def run_gemm(self, form: str, x, w, stage: Stage) -> tuple[KernelResult, BatchResult]:
        """``X·W``, ``X·Wᵀ`` or ``Xᵀ·G`` on the DCE."""
        b = Batch(self)
        where = self._gemm(b, form, _dense(x), w, stage)
        res = self._execute(b, f"GEMM {form} {np.shape(x)} · {np.shape(w)}")
        return KernelResult(self._gemm_rows(form, where), _stats(res, Unit.GEMM)), res

    def run_spmm_gemm(self, s, x, form, w, stages, *, keep=True, rows=None, fabric=None):
        """``A = S·X`` on the SAE, each row of A crossing the exchange port into the DCE
        as soon as it is finished, which computes ``A·W`` (``xw``) or ``A·Wᵀ`` (``xwt``).
        ``keep``: A is also written to memory and returned (else ``rows`` is None). X
        must fit one pass (F ≤ lanes) and the product one tile. ``fabric``: the rows
        cross a system's fabric on this route, and the DCE takes the ``rows`` that
        come back to this chip (default: all of S's)."""
        if form not in ("xw", "xwt"):
            raise ValueError(f"a fused GEMM is xw or xwt, got {form!r}")
        x = _dense(x)
        if x.shape[1] > self.L:
            raise ValueError(f"a fused SpMM takes at most {self.L} features, got {x.shape[1]}")
        b = Batch(self)
        a_out, passes = self._spmm(b, s, x, stages[0], to_xchg=True, to_mem=keep,
                                   follow=self.follow)
        n = s.shape[0] if rows is None else rows
        spmm_descs, b.descs = b.descs, []
        where = self._gemm(b, form, (n, x.shape[1]), w, stages[1], from_xchg=True)
        # the GEMM issues right after the first SPMM that sends rows (descriptors issue
        # in order): in column windows, the SPMMs after it wait for it to finish, and it
        # waits for the GEMM to take its rows
        cut = b.first_rows_out + 1
        b.descs = spmm_descs[:cut] + b.descs + spmm_descs[cut:]
        across = " across the fabric" if fabric is not None else ""
        res = self._execute(b, f"SpMM→GEMM {form} {s.shape[0]} rows{across}", fabric)
        a = self._gather(a_out, passes, s.shape[0], x.shape[1]) if keep else None
        return PairResult(KernelResult(a, _stats(res, Unit.SPMM)),
                          KernelResult(self._gemm_rows(form, where),
                                       _stats(res, Unit.GEMM))), res

    def run_gemm_spmm(self, form, x, w, s, stages, *, keep=True, fabric=None):
        """``T = X·W`` (``xw``) or ``X·Wᵀ`` (``xwt``) on the DCE, each row of T crossing
        the exchange port into the SAE's feature buffer, and ``S·T`` gathering each row
        as soon as its neighbours have arrived (``follow``). ``keep``: T is also written
        to memory and returned. T must fit one tile (at most ``lanes`` columns).
        ``fabric``: T's rows cross a system's fabric on this route (``x`` holds this
        chip's rows; the SAE takes all of S's columns' rows, in order)."""
        if form not in ("xw", "xwt"):
            raise ValueError(f"a GEMM feeding an SpMM is xw or xwt, got {form!r}")
        x = _dense(x)
        b = Batch(self)
        where = self._gemm(b, form, x, w, stages[0], to_mem=keep, to_xchg=True)
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        z_out, passes = self._spmm(b, s, (s.shape[1], m), stages[1], follow=True)
        across = " across the fabric" if fabric is not None else ""
        res = self._execute(b, f"GEMM {form}→SpMM {s.shape[0]} rows{across}", fabric)
        t = self._gemm_rows(form, where) if keep else None
        return PairResult(KernelResult(t, _stats(res, Unit.GEMM)),
                          KernelResult(self._gather(z_out, passes, s.shape[0], m),
                                       _stats(res, Unit.SPMM))), res

    def run_spmm_and_gemm(self, s, h, form, x, w, stages):
        """``S·H`` on the SAE beside a GEMM on the DCE, in one batch."""
        b = Batch(self)
        h = _dense(h)
        out, passes = self._spmm(b, s, h, stages[0], follow=self.follow)
        first = 3 if len(b.descs) > 2 else 2  # after the first two LOADs and an SPMM
        spmm_descs, b.descs = b.descs, []
        where = self._gemm(b, form, _dense(x), w, stages[1])
        # descriptors issue in order: the GEMM goes right after the first pass, so both
        # engines start at once
        b.descs = spmm_descs[:first] + b.descs + spmm_descs[first:]
        res = self._execute(b, f"SpMM {s.shape[0]} rows beside GEMM {form}")
        return PairResult(
            KernelResult(self._gather(out, passes, s.shape[0], h.shape[1]),
                         _stats(res, Unit.SPMM)),
            KernelResult(self._gemm_rows(form, where), _stats(res, Unit.GEMM))), res

    def run_descriptors(self, descs: list[int], label: str = "a batch") -> BatchResult:
        """Run descriptors (packed, :attr:`ChipLayouts.desc_layout`) as they are."""
        b = Batch(self)
        b.descs = list(descs)
        return self._execute(b, label)

    def descriptor(self, unit: Unit, **fields) -> int:
        """One packed descriptor (fields of :attr:`ChipLayouts.desc_layout`)."""
        return self.lay.desc_layout.const({"unit": unit, **fields}).as_bits()

    def descriptors(self, descs: list[int]) -> np.ndarray:
        """Packed descriptors as the device protocol carries them."""
        return from_ints(descs, self.desc_bytes)

    # ---------------------------------------------------------------- execution
    def _execute(self, b: Batch, label: str, fabric: dict | None = None) -> BatchResult:
        sites = " + ".join(site for site in self._sites if site)
        label, self._sites = (f"{sites}, {label}" if sites else label), ()
        for addr, words in b.writes:
            self.device.write(addr, words)
            self._report.words_written += len(words)
        self._batch_kept.clear()
        # a fabric route: the batch runs on every chip of a system at once
        across = {} if fabric is None else {"fabric": fabric}
        res = self.device.run(self.descriptors(b.descs),
                              budget=TIMEOUTS.batch_cycles(self.lay, b.descs), label=label,
                              **across)
        if res.error:
            raise DeviceError(f"{self.device.name}: the exchange router stopped {label}: "
                              f"{ChipError(res.error).describe()} (the driver broke the "
                              "one-producer, one-consumer contract; no row was lost)")
        if len(res.status) != len(b.descs):
            raise RuntimeError(f"{self.device.name}: {len(b.descs)} descriptors gave "
                               f"{len(res.status)} status records")
        self._report.device_seconds += res.device_seconds
        self._loads = (b.loads, b.rows_loaded)  # for the batch's record
        return res

    def _record(self, kind: str, sites, pairing: str, res: BatchResult) -> None:
        r = self._report
        r.kernel_runs += 1
        r.cycles += res.cycles
        r.batches.append(BatchRecord(kind=kind, sites=tuple(sites), pairing=pairing,
                                     cycles=res.cycles,
                                     sae_busy=res.counters.get("sae_busy_cycles", 0),
                                     dce_busy=res.counters.get("dce_busy_cycles", 0),
                                     memory_reads=res.counters.get("memory_reads", 0),
                                     memory_writes=res.counters.get("memory_writes", 0),
                                     memory_distinct_reads=res.counters.get(
                                         "memory_distinct_reads", 0),
                                     buffer_loads=self._loads[0],
                                     buffer_rows_loaded=self._loads[1]))

    def _read_rows(self, addr: int, count: int, lanes: int) -> np.ndarray:
        if count == 0:
            return np.zeros((0, lanes), dtype=np.int64)
        words = self.device.read(addr, count)
        self._report.words_read += count
        return unpack_signed(words, self.width, self.L)[:, :lanes]

    def _gather(self, out, passes, n, F):
        rows = self._read_rows(out, passes * n, self.L)
        return rows.reshape(passes, n, self.L).transpose(1, 0, 2).reshape(n, -1)[:, :F]

    def _mask_words(self, mask, lanes: int, tiles: int) -> np.ndarray:
        bits = _tiles(np.asarray(mask, dtype=np.uint8), lanes, tiles)
        words = np.zeros((len(bits), self.mem_bytes * 8), dtype=np.uint8)
        words[:, :lanes] = bits
        return np.packbits(words, axis=1, bitorder="little")

    def _pack(self, stream: str, values) -> np.ndarray:
        return pack(self.lay.stream_layouts[stream], values, self.mem_bytes)

    # ------------------------------------------------------------------- layout
    def _kept_csr(self, b: Batch, s: sp.csr_array, what: str) -> tuple[int, int]:
        """Address and beat count of S's beats, written on first use and kept."""
        h = hashlib.sha256()
        for a in (s.shape, s.indptr, s.indices, s.data):
            h.update(np.asarray(a, dtype=np.int64).tobytes())
        key = h.hexdigest()
        if key not in self._kept:
            nbeats = csr_beat_count(s, self.config.sae.edges)
            half = self.capacity // 2
            if nbeats > half:
                raise ValueError(
                    f"{what}: S ({s.shape[0]}x{s.shape[1]}, {s.nnz} non-zeros) takes "
                    f"{nbeats} CSR beats; the chip's memory keeps {half} words for sparse "
                    f"operands (ChipConfig.addr_width={self.config.addr_width})")
            addr = self._kept_base - nbeats
            if addr < half:
                # the upper half is full: forget every kept matrix (the adjacency comes
                # back on its next use; dropout makes a new X every epoch anyway) —
                # unless this batch already uses one, which the new one would overwrite
                if self._batch_kept:
                    raise ValueError(f"{what}: the sparse operands of one batch exceed the "
                                     f"{half} memory words kept for them")
                self._kept.clear()
                addr = self.capacity - nbeats
            beats = self._pack("csr", csr_beat_arrays(s, self.config.sae.edges))
            b.writes.append((addr, beats))
            self._kept[key] = (addr, nbeats)
            self._kept_base = addr
        self._batch_kept.add(key)
        return self._kept[key]

    def _spmm(self, b: Batch, s, x, stage: Stage, *, to_xchg=False, to_mem=True,
              follow=True):
        """LOAD/SPMM descriptors for S·X in ⌈F/L⌉ passes, alternating banks so that each
        pass's LOAD overlaps the previous pass's SPMM, and (``follow``) each SPMM trails
        its own LOAD. When S gathers from more rows than the buffer holds, each pass runs
        in column windows (:mod:`mixgcn.host.tiling`): a LOAD and an SPMM per window,
        the row sums kept between a block's windows. ``x`` = (rows, features): X arrives
        through the exchange port (one pass, one window). Returns (out address,
        passes)."""
        c = self.config
        s = sp.csr_array(s)
        n, k = s.shape
        from_xchg = isinstance(x, tuple)
        kx, F = x if from_xchg else x.shape
        if kx != k:
            raise ValueError(f"SpMM: S is {s.shape} but X has {kx} rows")
        plan = plan_windows(s, buffer_rows=c.sae.max_nodes, partial_rows=c.sae.partial_rows)
        if from_xchg and plan.tiled:
            raise ValueError(f"an SpMM fed by the DCE gathers from at most "
                             f"{c.sae.max_nodes} rows (SAEConfig.max_nodes), got {k}")
        degree = longest_row(s)
        if degree > c.sae.max_degree:
            raise ValueError(f"SpMM: a row of S has {degree} non-zeros; the sparse "
                             f"engine's accumulators are sized for {c.sae.max_degree} "
                             "(SAEConfig.max_degree)")
        self.fmt.check_reduction(degree, "SpMM row")
        L = self.L
        passes = max(1, -(-F // L))
        windows = [w for blk in plan.blocks for w in blk.windows]
        # the windows that read X in place, and those that load a gathered copy of the
        # rows of X they use (written here, each pass's after the other)
        gathered = [w.x_rows for w in windows if w.x_rows is not None]
        g_rows = sum(len(g) for g in gathered)
        x_addr = g_addr = 0
        if from_xchg:
            if passes > 1:
                raise ValueError(f"an SpMM fed by the DCE takes at most {L} features, got {F}")
        elif len(gathered) < len(windows):
            x_addr = b.put(self._pack("x", _tiles(x, L, passes)), "SpMM X")
        if gathered:
            g_addr = b.put(self._pack("x", _tiles(x[np.concatenate(gathered)], L, passes)),
                           "SpMM X (the rows each window uses)")
        m_addr = 0
        if stage.mask is not None:
            m_addr = b.put(self._mask_words(stage.mask, L, passes), "SpMM mask")
        out = b.alloc(passes * n, "SpMM output") if to_mem else 0
        beats = [[self._kept_csr(b, w.s, "SpMM") for w in blk.windows] for blk in plan.blocks]
        loads, spmms = [], []
        for p in range(passes):
            g_next = g_addr + p * g_rows
            for blk, blk_beats in zip(plan.blocks, beats, strict=True):
                last = len(blk.windows) - 1
                for i, (w, (beats_addr, nbeats)) in enumerate(zip(blk.windows, blk_beats,
                                                                  strict=True)):
                    bank = len(loads) % 2
                    if w.x_rows is None:
                        src = x_addr + p * k + w.lo
                    else:
                        src, g_next = g_next, g_next + w.rows
                    loads.append(dict(unit=Unit.LOAD, bank=bank, rows=w.rows, src=src,
                                      from_xchg=int(from_xchg)))
                    # the rows leave after the block's last window; before, their sums
                    # are kept (and from the second window on, added to)
                    windows = ({"keep": int(i < last), "accumulate": int(i > 0)}
                               if plan.tiled else {})
                    row0 = p * n + blk.start
                    spmms.append(dict(unit=Unit.SPMM, bank=bank, rows=blk.rows,
                                      src=beats_addr, src_len=nbeats, shift=stage.shift,
                                      relu=int(stage.relu),
                                      mask=int(stage.mask is not None and i == last),
                                      mask_addr=m_addr + row0, dst=out + row0,
                                      to_mem=int(to_mem and i == last),
                                      to_xchg=int(to_xchg and i == last),
                                      follow=int(follow), **windows))
        b.loads += len(loads)
        b.rows_loaded += sum(d["rows"] for d in loads)
        for d in loads[:2] + [d for i in range(len(spmms))
                              for d in (spmms[i], *loads[i + 2:i + 3])]:
            if d["unit"] == Unit.SPMM and (d["to_mem"] or d["to_xchg"]) and not b.first_rows_out:
                b.first_rows_out = len(b.descs)
            b.desc(**d)
        return out, passes

    def _gemm(self, b: Batch, form, x, w, stage: Stage, *, from_xchg=False, to_mem=True,
              to_xchg=False):
        """GEMM descriptors; ``x`` = (rows, reduction): X arrives through the exchange
        port. Returns where the result lands, for :meth:`_gemm_rows`."""
        c = self.config.dce
        R, C, V = c.rows, c.cols, c.b_lanes
        w = np.asarray(w, dtype=np.int64)
        if form not in _FORMS:
            raise ValueError(f"unknown GEMM form {form!r}: expected one of {sorted(_FORMS)}")
        n, k = x if from_xchg else x.shape
        self.fmt.check_reduction(n if form == "xtg" else k, f"GEMM {form} reduction")
        relu, mask = int(stage.relu), stage.mask
        if form == "xtg":
            mtot = w.shape[1]
            if n > c.max_rows:
                raise ValueError(f"GEMM xtg reduces over {n} rows; the dense engine's "
                                 f"accumulators are sized for {c.max_rows} "
                                 "(DCEConfig.max_rows)")
            kt, mt = -(-k // R), -(-mtot // C)
            a_addr = b.put(self._pack("a", _tiles(x, R, kt)), "GEMM xtg X")
            gw = np.zeros((mt * n, V), dtype=np.int64)  # b words are V wide, G tiles C
            gw[:, :C] = _tiles(w, C, mt)
            b_addr = b.put(self._pack("b", gw), "GEMM xtg G")
            out = b.alloc(kt * mt * R, "GEMM xtg output")
            for t in range(kt):
                for u in range(mt):
                    b.desc(Unit.GEMM, op=DCEOp.XTG, rows=n, k=min(R, k - t * R),
                           m=min(C, mtot - u * C), shift=stage.shift, relu=relu,
                           src=a_addr + t * n, src_len=n, src_b=b_addr + u * n, b_len=n,
                           dst=out + (t * mt + u) * R, to_mem=1)
            return out, kt, mt, k, mtot
        mtot = w.shape[1] if form == "xw" else w.shape[0]
        kw = w.shape[0] if form == "xw" else w.shape[1]
        if kw != k:
            raise ValueError(f"GEMM {form}: X has {k} columns but W reduces over {kw}")
        if k > c.max_k:
            raise ValueError(f"GEMM {form}: a reduction over {k} values exceeds the dense "
                             f"engine's weight store of {c.max_k} (DCEConfig.max_k)")
        chunks = max(1, -(-k // R))
        mt = max(1, -(-mtot // C))
        if from_xchg and (k > R or mt > 1):
            raise ValueError(f"a GEMM fed by the SAE takes rows of at most {R} values and "
                             f"makes rows of at most {C}, got {k} and {mtot}")
        if to_xchg and mt > 1:
            raise ValueError(f"a GEMM feeding the SAE makes rows of at most {C} values, "
                             f"got {mtot}")
        if from_xchg:
            a_addr = 0
        else:
            xp = np.zeros((n, chunks * R), dtype=np.int64)
            xp[:, :k] = x
            a_addr = b.put(self._pack("a", xp.reshape(-1, R)), f"GEMM {form} X")
        m_addr = 0
        if mask is not None:
            m_addr = b.put(self._mask_words(mask, C, mt), f"GEMM {form} mask")
        out = b.alloc(mt * n, f"GEMM {form} output") if to_mem else 0
        for u in range(mt):
            m0, m1 = u * C, min(mtot, (u + 1) * C)
            words = weight_words(form, w[:, m0:m1] if form == "xw" else w[m0:m1], R, V)
            b_addr = b.put(self._pack("b", words), f"GEMM {form} W")
            b.desc(Unit.GEMM, op=_FORMS[form], rows=n, k=k, m=m1 - m0, shift=stage.shift,
                   relu=relu, mask=int(mask is not None), mask_addr=m_addr + u * n,
                   src=a_addr, src_len=n * chunks, src_b=b_addr, b_len=len(words),
                   dst=out + u * n, from_xchg=int(from_xchg), to_mem=int(to_mem),
                   to_xchg=int(to_xchg))
        return out, mt, n, mtot

    def _gemm_rows(self, form, where) -> np.ndarray:
        C = self.config.dce.cols
        if form == "xtg":
            out, kt, mt, k, mtot = where
            R = self.config.dce.rows
            rows = self._read_rows(out, kt * mt * R, C).reshape(kt, mt, R, C)
            return rows.transpose(0, 2, 1, 3).reshape(kt * R, mt * C)[:k, :mtot]
        out, mt, n, mtot = where
        rows = self._read_rows(out, mt * n, C).reshape(mt, n, C)
        return rows.transpose(1, 0, 2).reshape(n, mt * C)[:, :mtot]


# ------------------------------------------------------------------------ planning


class PlanningDevice:
    """A device that executes nothing: it checks every address a run would touch and
    answers each descriptor with a status record, and each read with zeros. Driving a
    training step through it checks every limit of the chip (:func:`plan_training`)."""

    def __init__(self, config: ChipConfig, name: str = "chip"):
        self.config, self.name = config, name
        self.lay = ChipLayouts(config)
        self.mem_bytes = -(-self.lay.mem_width // 8)
        self.capacity = 1 << config.addr_width

    def _check(self, addr: int, count: int) -> None:
        if addr < 0 or addr + count > self.capacity:
            raise ValueError(f"words {addr}..{addr + count - 1} lie outside the chip's "
                             f"{self.capacity}-word memory")

    def write(self, addr: int, words) -> None:
        self._check(addr, len(words))

    def run(self, descriptors, *, budget: int, label: str) -> BatchResult:
        units = [Unit(self.lay.desc_layout.from_bits(d).unit) for d in to_ints(descriptors)]
        # every output stage "saw" a magnitude of 1, so delayed scaling takes effect and
        # the pipelined pairs of the second step are planned too
        return BatchResult(cycles=0, status=[StatusRecord(i, u, 0, 1, 0)
                                             for i, u in enumerate(units)])

    def read(self, addr: int, count: int) -> np.ndarray:
        self._check(addr, count)
        return np.zeros((count, self.mem_bytes), dtype=np.uint8)

    def counters(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        pass


def plan_training(dataset, config, chip: ChipConfig, reorder: str = "none") -> None:
    """Raise ``ValueError`` naming the operand, its size and the chip's limit when a
    training run of ``config`` (a GCNConfig) on ``dataset`` does not fit ``chip``.

    Two training steps run on a :class:`PlanningDevice` with the features undropped
    (dropout only removes non-zeros): every kernel and every pipelined pair a real run
    issues is laid out with the driver's own code, so the check and the run cannot
    disagree. Nothing is simulated or built."""
    from mixgcn.golden.gcn import GCN
    from mixgcn.golden.graph import normalized_adjacency
    from mixgcn.golden.reorder import node_order
    from mixgcn.golden.reorder import reorder as reordered
    from mixgcn.host.precision import FixedOps
    from mixgcn.host.train import normalize_features

    n, f = dataset.num_nodes, dataset.num_features
    if n > chip.sae.max_nodes and not chip.sae.partial_rows:  # the cheapest refusal first
        raise ValueError(f"{n} nodes; the chip's sparse-engine buffer holds "
                         f"{chip.sae.max_nodes} rows (SAEConfig.max_nodes) and it keeps no "
                         "partial sums to run in column windows (SAEConfig.partial_rows=0)")
    dataset = reordered(dataset, node_order(dataset, reorder))
    ops = FixedOps(ChipBackend(PlanningDevice(chip)))
    model = GCN(config, f, dataset.num_classes, np.random.default_rng(config.seed))
    adj = ops.adjacency(normalized_adjacency(dataset.edge_index, n))
    x = normalize_features(dataset.features)
    for _ in range(2):
        logits, cache = model.forward(ops, adj, x, None)
        model.backward(ops, adj, cache, np.zeros_like(logits))

"""Kernels on a simulated chip (:class:`~mixgcn.sim.chip_harness.ChipHarness`) from cocotb.

:class:`ChipKernels` turns each SpMM / GEMM call into a batch of descriptors: it lays
the operands out in the chip's memory (through files the memory model loads in one
cycle; sparse matrices are written once and kept), runs the batch with no Python in the loop (the
chip fetches descriptors from its descriptor memory and reports each completion into
its status memory), and reads back the output rows, the output stage's statistics and
the chip's counters. The same code serves the testbenches and the RTL backend.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import cocotb
import numpy as np
import scipy.sparse as sp
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer

from mixgcn.gen.config import ChipConfig
from mixgcn.golden.fixed import OutputStats
from mixgcn.hdl.chip import ENGINE_COUNTERS, ChipLayouts, Unit
from mixgcn.hdl.dce import DCEOp
from mixgcn.sim.dce_model import weight_words
from mixgcn.sim.packing import csr_beat_arrays, pack, unpack_signed

__all__ = ["ChipKernels", "RunResult"]

_FORMS = {"xw": DCEOp.XW, "xwt": DCEOp.XWT, "xtg": DCEOp.XTG}


@dataclass
class RunResult:
    """One batch of descriptors: its status records and the chip's counters."""

    cycles: int  # chip cycles from the start pulse to the last status record
    status: list = field(repr=False)  # one dict per descriptor, in completion order
    counters: dict = field(default_factory=dict)  # engine counters over the batch
    wall_seconds: float = 0.0

    def stats(self, unit: Unit) -> OutputStats:
        rec = [s for s in self.status if s["unit"] == unit]
        return OutputStats(max_abs=max((s["max_abs"] for s in rec), default=0),
                           saturated=sum(s["saturated"] for s in rec))


def _mask_words(mask) -> list[int]:
    mask = np.asarray(mask, dtype=np.int64)
    return (mask << np.arange(mask.shape[1], dtype=np.int64)).sum(axis=1).tolist()


def _tiles(a, lanes: int, tiles: int) -> np.ndarray:
    """``a`` [rows, ≤ tiles·lanes] as ``tiles`` blocks of ``lanes`` columns one after
    the other, zero-padded: [tiles · rows, lanes] (the order passes and tiles read)."""
    a = np.asarray(a)
    padded = np.zeros((a.shape[0], tiles * lanes), dtype=np.int64)
    padded[:, :a.shape[1]] = a
    return padded.reshape(a.shape[0], tiles, lanes).transpose(1, 0, 2).reshape(-1, lanes)


class ChipKernels:
    """SpMM, GEMM and fused SpMM→GEMM on one simulated chip (``dut``: a ChipHarness)."""

    def __init__(self, dut, config: ChipConfig):
        self.dut, self.config = dut, config
        self.lay = ChipLayouts(config)
        self.L = config.lanes
        self.width = config.sae.width
        self.capacity = 1 << config.addr_width
        # memory map: each kernel's operands and results from address 0 up (the lower
        # half); sparse matrices, kept across kernels, from the top down (upper half)
        self.static_base = self.capacity
        self.static: dict[str, tuple[int, int]] = {}  # content hash -> (address, beats)
        self.batch_static: set[str] = set()  # kept matrices the next batch reads
        self.stall = 0
        self.words_written = self.words_read = 0  # memory words Python wrote and read
        self.pending = []  # (address, words) not written yet
        args = getattr(cocotb, "plusargs", {}) or {}
        self.load_path = Path(args.get("MIXGCN_MEM_LOAD", "mixgcn_mem_load.hex"))
        self.dump_path = Path(args.get("MIXGCN_MEM_DUMP", "mixgcn_mem_dump.hex"))

    # ------------------------------------------------------------------- memory
    # Memory traffic goes through files: the memory model reads a hex file into its
    # array in one cycle ($readmemh) and writes a range out in one cycle ($writememh),
    # instead of one simulator call per word.
    def write(self, addr: int, words) -> None:
        """Stage ``words`` for address ``addr``; they reach memory at the next flush
        (every batch starts with one)."""
        self.pending.append((addr, words))
        self.words_written += len(words)

    async def flush(self) -> None:
        if not self.pending:
            return
        with open(self.load_path, "w") as f:
            for addr, words in self.pending:
                f.write(f"@{addr:x}\n")
                f.write("\n".join(f"{int(w):x}" for w in words))
                f.write("\n")
        self.pending.clear()
        await self._pulse(self.dut.mem_load)

    async def _pulse(self, signal) -> None:
        signal.value = 1
        await RisingEdge(self.dut.clk)
        signal.value = 0
        await RisingEdge(self.dut.clk)

    async def read(self, addr: int, count: int) -> list[int]:
        if count == 0:
            return []
        await self.flush()
        self.dut.dump_first.value = addr
        self.dut.dump_last.value = addr + count - 1
        await self._pulse(self.dut.mem_dump)
        with open(self.dump_path) as f:
            words = [int(line, 16) for line in f
                     if line.strip() and not line.startswith(("//", "@"))]
        if len(words) != count:
            raise RuntimeError(f"memory dump of {count} words returned {len(words)}")
        self.words_read += count
        return words

    async def read_rows(self, addr: int, count: int, lanes: int) -> np.ndarray:
        words = await self.read(addr, count)
        return unpack_signed(words, self.width, self.L)[:, :lanes]

    def _csr(self, s: sp.csr_array) -> tuple[int, int]:
        """Address and beat count of S's beats, written on first use and kept."""
        h = hashlib.sha256()
        for a in (s.shape, s.indptr, s.indices, s.data):
            h.update(np.asarray(a, dtype=np.int64).tobytes())
        key = h.hexdigest()
        if key not in self.static:
            beats = pack(self.lay.stream_layouts["csr"], csr_beat_arrays(s, self.config.sae.edges))
            addr = self.static_base - len(beats)
            if addr < self.capacity // 2:
                # the upper half is full: forget every kept matrix (the adjacency comes
                # back on its next use; dropout makes a new X every epoch anyway) —
                # unless this batch already uses one, which the new one would overwrite
                if self.batch_static:
                    raise ValueError("the sparse operands of one batch exceed the "
                                     f"{self.capacity // 2} memory words kept for them")
                self.static.clear()
                addr = self.capacity - len(beats)
                if addr < self.capacity // 2:
                    raise ValueError(
                        f"a sparse operand of {s.shape} needs {len(beats)} beats; the "
                        f"chip's memory keeps {self.capacity // 2} for sparse operands "
                        f"(ChipConfig.addr_width={self.config.addr_width})")
            self.write(addr, beats)
            self.static[key] = (addr, len(beats))
            self.static_base = addr
        self.batch_static.add(key)
        return self.static[key]

    def _check_room(self, need: int, what: str) -> None:
        raise ValueError(f"{what} need {need} memory words; the lower half of the chip's "
                         f"memory, {self.capacity // 2} words, holds them "
                         f"(ChipConfig.addr_width={self.config.addr_width})")

    class _Scratch:
        def __init__(self, outer):
            self.outer, self.top = outer, 0

        def put(self, words) -> int:
            addr = self.alloc(len(words))
            self.outer.write(addr, words)
            return addr

        def alloc(self, n: int) -> int:
            addr = self.top
            self.top += n
            if self.top > self.outer.capacity // 2:
                self.outer._check_room(self.top, "a kernel's operands")
            return addr

    # ------------------------------------------------------------------- batches
    def desc(self, unit: Unit, **fields) -> int:
        return self.lay.desc_layout.const({"unit": unit, **fields}).as_bits()

    def _budget(self, descs: list[int]) -> int:
        """Cycles a batch may take before it counts as hung: generous for its work (every
        word it reads and row it writes, K chunks per row of a GEMM), slowed by stalls."""
        work = 0
        for d in descs:
            f = self.lay.desc_layout.from_bits(d)
            work += int(f.src_len) + int(f.b_len) + int(f.rows) * (1 + int(f.k))
        return int(20 * (work + 1000) * 256 / max(1, 256 - self.stall))

    async def run(self, descs: list[int]) -> RunResult:
        """Run a batch of descriptors (packed words) to its last status record."""
        dut = self.dut
        n = len(descs)
        if n > len(dut.desc_src.mem):
            raise ValueError(f"{n} descriptors exceed the harness's descriptor memory")
        await self.flush()
        self.batch_static.clear()
        src = dut.desc_src.mem
        for i, d in enumerate(descs):
            src[i].value = int(d)
        before = {name: int(getattr(dut, name).value) for name in self._counter_names()}
        dut.stall.value = self.stall
        dut.desc_count.value = n
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.clk)  # the start pulse has cleared `received`
        t0 = time.perf_counter()
        limit = Timer(10 * self._budget(descs), unit="ns")
        while int(dut.received.value) != n:
            fired = await First(RisingEdge(dut.done), limit)
            if fired is limit:
                raise TimeoutError(f"chip: {int(dut.received.value)} of {n} descriptors "
                                   "completed before the time budget ran out")
        await ClockCycles(dut.clk, 1)
        wall = time.perf_counter() - t0
        status = []
        layout = self.lay.status_layout
        for w in self.read_status(n):
            rec = layout.from_bits(w)
            status.append({name: rec[name] if name == "unit" else int(rec[name])
                           for name, _ in layout})
        after = {name: int(getattr(dut, name).value) for name in self._counter_names()}
        counters = {k: after[k] - before[k] for k in after}
        counters.pop("cycles")
        return RunResult(cycles=int(dut.elapsed.value), status=status, counters=counters,
                         wall_seconds=wall)

    def read_status(self, n: int) -> list[int]:
        mem = self.dut.status_sink.mem
        return [int(mem[i].value) for i in range(n)]

    @staticmethod
    def _counter_names():
        return ("cycles", "load_cycles",
                *(f"{e}_{c}" for e in ("sae", "dce") for c in ENGINE_COUNTERS))

    # ------------------------------------------------------------------- kernels
    def _spmm_descs(self, scratch, s, x, shift, relu, mask, *, to_xchg=False, to_mem=True,
                    follow=True):
        """LOAD/SPMM descriptors for S·X in ⌈F/L⌉ passes, alternating banks so that each
        pass's LOAD overlaps the previous pass's SPMM, and (``follow``) each SPMM trails
        its own LOAD. ``x`` = (rows, features): X arrives through the exchange port
        (one pass). Returns (descs, out address, passes)."""
        c = self.config
        s = sp.csr_array(s)
        n, k = s.shape
        from_xchg = isinstance(x, tuple)
        kx, F = x if from_xchg else np.shape(x)
        if kx != k:
            raise ValueError(f"SpMM: S is {s.shape} but X has {kx} rows")
        if k > c.sae.max_nodes:
            raise ValueError(f"SpMM: X has {k} rows; the chip's SAE buffer holds "
                             f"{c.sae.max_nodes} (SAEConfig.max_nodes)")
        deg = np.diff(s.indptr)
        if deg.size and deg.max() > c.sae.max_degree:
            raise ValueError(f"SpMM: a row of S has {deg.max()} non-zeros; the SAE's "
                             f"accumulators are sized for {c.sae.max_degree}")
        beats_addr, nbeats = self._csr(s)
        L = self.L
        passes = max(1, -(-F // L))
        if from_xchg:
            if passes > 1:
                raise ValueError(f"an SpMM fed by the DCE takes at most {L} features, got {F}")
            x_addr = 0
        else:
            x_addr = scratch.put(pack(self.lay.stream_layouts["x"], _tiles(x, L, passes)))
        m_addr = 0
        if mask is not None:
            m_addr = scratch.put(_mask_words(_tiles(np.asarray(mask, dtype=bool), L, passes)))
        out = scratch.alloc(passes * n) if to_mem else 0
        loads = [self.desc(Unit.LOAD, bank=p % 2, rows=k, src=x_addr + p * k,
                           from_xchg=int(from_xchg))
                 for p in range(passes)]
        spmms = [self.desc(Unit.SPMM, bank=p % 2, rows=n, src=beats_addr, src_len=nbeats,
                           shift=shift, relu=int(relu), mask=int(mask is not None),
                           mask_addr=m_addr + p * n, dst=out + p * n, to_mem=int(to_mem),
                           to_xchg=int(to_xchg), follow=int(follow))
                 for p in range(passes)]
        descs = loads[:2] + [d for p in range(passes)
                             for d in (spmms[p], *loads[p + 2:p + 3])]
        return descs, out, passes

    async def _gather(self, out, passes, n, F):
        rows = await self.read_rows(out, passes * n, self.L)
        return rows.reshape(passes, n, self.L).transpose(1, 0, 2).reshape(n, -1)[:, :F]

    async def spmm(self, s, x, shift: int, relu=False, mask=None, follow=True):
        """``S · X`` through the output stage; returns (rows, OutputStats, RunResult)."""
        scratch = self._Scratch(self)
        descs, out, passes = self._spmm_descs(scratch, s, x, shift, relu, mask, follow=follow)
        res = await self.run(descs)
        n, F = s.shape[0], np.shape(x)[1]
        return await self._gather(out, passes, n, F), res.stats(Unit.SPMM), res

    def _gemm_descs(self, scratch, form, x, w, shift, relu, mask, *, from_xchg=False,
                    to_mem=True, to_xchg=False):
        c = self.config.dce
        R, C, V = c.rows, c.cols, c.b_lanes
        w = np.asarray(w, dtype=np.int64)
        if form not in _FORMS:
            raise ValueError(f"unknown GEMM form {form!r}: expected one of {sorted(_FORMS)}")
        if from_xchg:
            n, k = x  # rows and reduction length arrive through the exchange port
        else:
            x = np.asarray(x, dtype=np.int64)
            n, k = x.shape
        if form == "xtg":
            mtot = w.shape[1]
            if n > c.max_rows:
                raise ValueError(f"GEMM xtg reduces over {n} rows; the DCE's accumulators "
                                 f"are sized for {c.max_rows} (DCEConfig.max_rows)")
            kt, mt = -(-k // R), -(-mtot // C)
            a_addr = scratch.put(pack(self.lay.stream_layouts["a"], _tiles(x, R, kt)))
            gw = np.zeros((mt * n, V), dtype=np.int64)  # b words are V wide, G tiles C
            gw[:, :C] = _tiles(w, C, mt)
            b_addr = scratch.put(pack(self.lay.stream_layouts["b"], gw))
            out = scratch.alloc(kt * mt * R)
            descs = []
            for t in range(kt):
                for u in range(mt):
                    kk, mm = min(R, k - t * R), min(C, mtot - u * C)
                    descs.append(self.desc(
                        Unit.GEMM, op=DCEOp.XTG, rows=n, k=kk, m=mm, shift=shift,
                        relu=int(relu), src=a_addr + t * n, src_len=n, src_b=b_addr + u * n,
                        b_len=n, dst=out + (t * mt + u) * R, to_mem=1))
            return descs, (out, kt, mt, k, mtot)
        mtot = w.shape[1] if form == "xw" else w.shape[0]
        kw = w.shape[0] if form == "xw" else w.shape[1]
        if kw != k:
            raise ValueError(f"GEMM {form}: X has {k} columns but W reduces over {kw}")
        if k > c.max_k:
            raise ValueError(f"GEMM {form}: reduction {k} exceeds the DCE's max_k {c.max_k}")
        chunks = max(1, -(-k // R))
        if from_xchg:
            if k > R:
                raise ValueError(f"a fused GEMM takes rows of at most {R} values, got {k}")
            a_addr = 0
        else:
            xp = np.zeros((n, chunks * R), dtype=np.int64)
            xp[:, :k] = x
            a_addr = scratch.put(pack(self.lay.stream_layouts["a"], xp.reshape(-1, R)))
        mt = max(1, -(-mtot // C))
        if from_xchg and mt > 1:
            raise ValueError(f"a fused GEMM makes rows of at most {C} values, got {mtot}")
        m_addr = 0
        if mask is not None:
            m_addr = scratch.put(_mask_words(_tiles(np.asarray(mask, dtype=bool), C, mt)))
        if to_xchg and mt > 1:
            raise ValueError(f"a GEMM feeding the SAE makes rows of at most {C} values, "
                             f"got {mtot}")
        out = scratch.alloc(mt * n) if to_mem else 0
        descs = []
        for u in range(mt):
            m0, m1 = u * C, min(mtot, (u + 1) * C)
            b = weight_words(form, w[:, m0:m1] if form == "xw" else w[m0:m1], R, V)
            b_addr = scratch.put(pack(self.lay.stream_layouts["b"], b))
            descs.append(self.desc(
                Unit.GEMM, op=_FORMS[form], rows=n, k=k, m=m1 - m0, shift=shift,
                relu=int(relu), mask=int(mask is not None), mask_addr=m_addr + u * n,
                src=a_addr, src_len=n * chunks, src_b=b_addr, b_len=len(b),
                dst=out + u * n, from_xchg=int(from_xchg), to_mem=int(to_mem),
                to_xchg=int(to_xchg)))
        return descs, (out, mt, n, mtot)

    async def _gemm_result(self, form, where):
        C = self.config.dce.cols
        if form == "xtg":
            out, kt, mt, k, mtot = where
            R = self.config.dce.rows
            rows = (await self.read_rows(out, kt * mt * R, C)).reshape(kt, mt, R, C)
            return rows.transpose(0, 2, 1, 3).reshape(kt * R, mt * C)[:k, :mtot]
        out, mt, n, mtot = where
        rows = (await self.read_rows(out, mt * n, C)).reshape(mt, n, C)
        return rows.transpose(1, 0, 2).reshape(n, mt * C)[:, :mtot]

    async def gemm(self, form: str, x, w, shift: int, relu=False, mask=None):
        """``X·W``, ``X·Wᵀ`` or ``Xᵀ·G`` on the DCE; returns (rows, OutputStats, RunResult)."""
        scratch = self._Scratch(self)
        descs, where = self._gemm_descs(scratch, form, x, w, shift, relu, mask)
        res = await self.run(descs)
        return await self._gemm_result(form, where), res.stats(Unit.GEMM), res

    async def spmm_gemm(self, s, x, shift: int, form: str, w, shift2: int, *, relu=False,
                        mask=None, relu2=False, mask2=None, keep=True):
        """The fine-grain pipeline: ``A = S·X`` on the SAE, each row of A crossing the
        exchange port into the DCE as soon as it is finished, which computes ``A·W``
        (``xw``) or ``A·Wᵀ`` (``xwt``). ``keep``: A is also written to memory and
        returned. X must fit one pass (F ≤ lanes) and the product one tile."""
        if form not in ("xw", "xwt"):
            raise ValueError(f"a fused GEMM is xw or xwt, got {form!r}")
        F = np.shape(x)[1]
        if F > self.L:
            raise ValueError(f"a fused SpMM takes at most {self.L} features, got {F}")
        scratch = self._Scratch(self)
        sd, a_out, passes = self._spmm_descs(scratch, s, x, shift, relu, mask, to_xchg=True,
                                             to_mem=keep)
        n = s.shape[0]
        gd, where = self._gemm_descs(scratch, form, (n, F), w, shift2, relu2, mask2,
                                     from_xchg=True)
        res = await self.run(sd + gd)
        a = await self._gather(a_out, passes, n, F) if keep else None
        return (a, res.stats(Unit.SPMM), await self._gemm_result(form, where),
                res.stats(Unit.GEMM), res)

    async def gemm_spmm(self, form: str, x, w, shift: int, s, shift2: int, *, relu2=False,
                        mask2=None, keep=True):
        """The other half of a layer's pipeline: ``T = X·W`` (``xw``) or ``X·Wᵀ``
        (``xwt``) on the DCE, each row of T crossing the exchange port into the SAE's
        feature buffer, and ``S·T`` gathering each row as soon as its neighbours have
        arrived (``follow``). ``keep``: T is also written to memory and returned. T must
        fit one tile (at most ``lanes`` columns)."""
        if form not in ("xw", "xwt"):
            raise ValueError(f"a GEMM feeding an SpMM is xw or xwt, got {form!r}")
        x = np.asarray(x, dtype=np.int64)
        scratch = self._Scratch(self)
        gd, where = self._gemm_descs(scratch, form, x, w, shift, False, None, to_mem=keep,
                                     to_xchg=True)
        m = np.shape(w)[1] if form == "xw" else np.shape(w)[0]
        sd, z_out, passes = self._spmm_descs(scratch, s, (x.shape[0], m), shift2, relu2,
                                             mask2)
        res = await self.run(gd + sd)
        t = await self._gemm_result(form, where) if keep else None
        return (t, res.stats(Unit.GEMM), await self._gather(z_out, passes, s.shape[0], m),
                res.stats(Unit.SPMM), res)

    async def spmm_and_gemm(self, s, h, shift: int, form: str, x, w, shift2: int):
        """Two independent kernels in one batch, ``S·H`` on the SAE beside a GEMM on the
        DCE. Returns (S·H, its stats, the GEMM's result, its stats, RunResult)."""
        scratch = self._Scratch(self)
        sd, out, passes = self._spmm_descs(scratch, s, h, shift, False, None)
        gd, where = self._gemm_descs(scratch, form, x, w, shift2, False, None)
        # descriptors issue in order: the GEMM goes right after the first pass's
        # LOAD/SPMM, so both engines start at once
        first = 3 if passes > 1 else 2
        res = await self.run(sd[:first] + gd + sd[first:])
        y1 = await self._gather(out, passes, s.shape[0], np.shape(h)[1])
        y2 = await self._gemm_result(form, where)
        return y1, res.stats(Unit.SPMM), y2, res.stats(Unit.GEMM), res

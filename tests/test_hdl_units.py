"""Unit tests in amaranth.sim: the MAC cell, the output stage, the DCE on small jobs."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from mixgcn.gen.config import DCE_PRESETS, DCEConfig
from mixgcn.golden import fixed
from mixgcn.hdl.dce import DenseCombinationEngine
from mixgcn.hdl.mac import MACCell
from mixgcn.hdl.output_stage import OutputStage
from mixgcn.sim.build import CLOCK_PERIOD_NS
from mixgcn.sim.verify.dce_model import make_job

PERIOD = CLOCK_PERIOD_NS * 1e-9


def _run(dut, *testbenches, deadline=None):
    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    for tb in testbenches:
        sim.add_testbench(tb)
    if deadline:
        sim.run_until(deadline)
    else:
        sim.run()


def test_mac_cell_matches_model():
    rng = np.random.default_rng(0)
    dut = MACCell(16, 40)
    lo, hi = fixed.mant_range(16)
    steps = [dict(a=int(rng.choice([lo, hi, rng.integers(lo, hi)])),
                  b=int(rng.choice([lo, hi, rng.integers(lo, hi)])),
                  en=int(rng.random() < 0.7), clear=int(rng.random() < 0.05),
                  shift=int(rng.random() < 0.2),
                  below=int(rng.integers(-(1 << 39), 1 << 39))) for _ in range(600)]

    async def tb(ctx):
        # step i's inputs are set before clock edge i. Its product (with en) lands in
        # acc at edge i+2; its clear zeroes acc at edge i+1 and cancels what would land
        # at i+1 and i+2; its shift loads acc at edge i+1 with `below` as it is then.
        acc, landing, prev = 0, {}, None
        for i, s in enumerate(steps):
            for name, v in s.items():
                ctx.set(getattr(dut, name), v)
            await ctx.tick()
            if s["en"]:
                landing[i + 2] = s["a"] * s["b"]
            if s["clear"]:
                landing.pop(i + 1, None)
                landing.pop(i + 2, None)
            if prev and prev["clear"]:
                acc = 0
            elif i in landing:
                acc += landing.pop(i)
            elif prev and prev["shift"]:
                acc = s["below"]
            assert ctx.get(dut.acc) == acc, i
            if prev:  # the product of the operands set before the previous edge
                assert ctx.get(dut.product) == prev["a"] * prev["b"], i
            prev = s

    _run(dut, tb)


def _stage_vectors(rng, lanes, acc_width, n):
    lo, hi = -(1 << (acc_width - 1)), (1 << (acc_width - 1)) - 1
    special = [0, 1, -1, lo, hi, 1 << 20, -(1 << 20), (1 << 15) + 1]
    # exact ties for the shifts the test uses: odd multiples of half an output step
    special += [t * (1 << (s - 1)) for s in (1, 2, 15, 20, 33) for t in (3, 5, -3, -5)]
    rows = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.3:
            row = rng.choice(special, size=lanes)
        elif kind < 0.6:
            row = rng.integers(-(1 << 24), 1 << 24, size=lanes)
        else:
            row = rng.integers(lo, hi, size=lanes, endpoint=True)
        rows.append([int(v) for v in row])
    return rows


@pytest.mark.parametrize("seed", range(3))
def test_output_stage_matches_golden_under_stalls(seed):
    rng = np.random.default_rng(seed)
    lanes, acc_width = 4, 48
    # each batch: fixed settings, several rows
    batches = []
    for _ in range(12):
        rows = _stage_vectors(rng, lanes, acc_width, int(rng.integers(1, 8)))
        masks = [int(v) for v in rng.integers(0, 1 << lanes, size=len(rows))]
        batches.append(dict(shift=int(rng.choice([0, 1, 2, 15, 20, 33, 47])),
                            relu=int(rng.random() < 0.5), mask_en=int(rng.random() < 0.5),
                            rows=rows, masks=masks))
    _run_output_stage(batches, rng, lanes=lanes, width=16, acc_width=acc_width)


def test_output_stage_at_its_bounds():
    """Accumulators that round exactly onto the largest and smallest output (kept, not
    saturated) and one step past them (saturated), ties on either side, with ReLU."""
    width, acc_width, lanes = 16, 48, 4
    lo, hi = fixed.mant_range(width)
    batches = []
    for shift in (0, 1, 7, 20):
        half = (1 << (shift - 1)) if shift else 0
        edges = [hi << shift, (hi << shift) + half - (1 if shift else 0),
                 (hi << shift) + half, (hi + 1) << shift,
                 lo << shift, (lo << shift) - half, (lo << shift) - half - 1,
                 (lo - 1) << shift, ((hi - 1) << shift) + half, ((lo + 1) << shift) - half]
        rows = [edges[i:i + lanes] + [0] * (lanes - len(edges[i:i + lanes]))
                for i in range(0, len(edges), lanes)]
        for relu in (0, 1):
            batches.append(dict(shift=shift, relu=relu, mask_en=0, rows=rows,
                                masks=[0] * len(rows)))
    _run_output_stage(batches, np.random.default_rng(5), lanes=lanes, width=width,
                      acc_width=acc_width)


def _run_output_stage(batches, rng, *, lanes, width, acc_width):
    """The output stage against golden under random backpressure: every row's values and
    ``last``, and each batch's statistics (``max_abs``, ``saturated``)."""
    dut = OutputStage(lanes=lanes, width=width, acc_width=acc_width)
    received = []

    async def producer(ctx):
        for b in batches:
            ctx.set(dut.clear, 1)
            await ctx.tick()
            ctx.set(dut.clear, 0)
            ctx.set(dut.shift, b["shift"])
            ctx.set(dut.relu, b["relu"])
            ctx.set(dut.mask_en, b["mask_en"])
            for i, (row, mask) in enumerate(zip(b["rows"], b["masks"], strict=True)):
                while rng.random() < 0.3:
                    await ctx.tick()
                ctx.set(dut.i.payload, dut.in_layout.const(
                    {"acc": row, "mask": mask, "last": int(i == len(b["rows"]) - 1)}))
                ctx.set(dut.i.valid, 1)
                await ctx.tick().until(dut.i.ready)
                ctx.set(dut.i.valid, 0)
            # wait for the batch to drain, then check the statistics
            while len(received) < sum(len(x["rows"]) for x in batches[:batches.index(b) + 1]):
                await ctx.tick()
            acc = np.array(b["rows"], dtype=object)
            want_max = max(abs(int(v)) for v in acc.ravel())
            assert ctx.get(dut.max_abs) == want_max
            mask = None
            if b["mask_en"]:
                mask = np.array([[(mk >> j) & 1 for j in range(lanes)] for mk in b["masks"]])
            _, st = fixed.output_stage(np.array(b["rows"], dtype=np.int64), b["shift"], width,
                                       relu=bool(b["relu"]), mask=mask)
            assert ctx.get(dut.saturated) == st.saturated

    async def consumer(ctx):  # random backpressure
        while True:
            ctx.set(dut.o.ready, int(rng.random() < 0.6))
            await ctx.tick()

    async def monitor(ctx):
        while True:
            _, _, valid, ready, payload = await ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload)
            if valid and ready:
                received.append(([int(payload.data[j]) for j in range(lanes)],
                                 int(payload.last)))

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(producer)
    sim.add_process(consumer)
    sim.add_process(monitor)
    sim.run()

    expected = []
    for b in batches:
        mask = None
        if b["mask_en"]:
            mask = np.array([[(mk >> j) & 1 for j in range(lanes)] for mk in b["masks"]])
        out, _ = fixed.output_stage(np.array(b["rows"], dtype=np.int64), b["shift"], width,
                                    relu=bool(b["relu"]), mask=mask)
        expected += [(list(map(int, r)), int(i == len(b["rows"]) - 1)) for i, r in
                     enumerate(out)]
    assert received == expected


def _dce_sim(cfg: DCEConfig, jobs, rng, idle=0.3, ready=0.7):
    """Run jobs through the DCE with random idle cycles on every input and random
    backpressure on the output; return the output rows and the per-job statistics."""
    dut = DenseCombinationEngine(cfg)
    received, stats = [], []

    def driver(stream, layout, words):
        async def run(ctx):
            for w in words:
                while rng.random() < idle:
                    await ctx.tick()
                ctx.set(stream.payload, layout.const(w) if layout is not None else w)
                ctx.set(stream.valid, 1)
                await ctx.tick().until(stream.ready)
                ctx.set(stream.valid, 0)
        return run

    async def until(ctx, what, done, limit=5000):
        """Tick until ``done()``; a DCE that deadlocks fails here instead of hanging."""
        for _ in range(limit):
            if done():
                return
            await ctx.tick()
        raise AssertionError(f"the DCE did not get to {what} in {limit} cycles")

    async def commands(ctx):
        for job in jobs:
            while rng.random() < idle:
                await ctx.tick()
            ctx.set(dut.cmd.payload, dut.cmd_layout.const(job.cmd()))
            ctx.set(dut.cmd.valid, 1)
            await until(ctx, "take a command", lambda: ctx.get(dut.cmd.ready))
            await ctx.tick()
            ctx.set(dut.cmd.valid, 0)
            await ctx.tick()
            await until(ctx, "finish an operation", lambda: ctx.get(dut.idle))
            stats.append((ctx.get(dut.max_abs), ctx.get(dut.saturated)))
        total = sum(len(j.expected) for j in jobs)
        await until(ctx, "send every row", lambda: len(received) >= total)

    async def consumer(ctx):
        while True:
            ctx.set(dut.out.ready, int(rng.random() < ready))
            await ctx.tick()

    async def monitor(ctx):
        while True:
            _, _, valid, rdy, payload = await ctx.tick().sample(
                dut.out.valid, dut.out.ready, dut.out.payload)
            if valid and rdy:
                received.append([int(payload.data[j]) for j in range(cfg.cols)]
                                + [int(payload.last)])

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(commands)
    sim.add_testbench(driver(dut.a, dut.a_layout, [w for j in jobs for w in j.a_words]),
                      background=True)
    sim.add_testbench(driver(dut.b, dut.b_layout, [w for j in jobs for w in j.b_words]),
                      background=True)
    sim.add_testbench(driver(dut.mask, None, [w for j in jobs for w in j.mask_words]),
                      background=True)
    sim.add_process(consumer)
    sim.add_process(monitor)
    sim.run()
    return received, stats


def _expected_rows(jobs):
    rows = []
    for j in jobs:
        for i, r in enumerate(j.expected.tolist()):
            rows.append(r + [int(i == len(j.expected) - 1)])
    return rows


def _random_jobs(cfg, rng, count):
    lo, hi = fixed.mant_range(cfg.width)
    jobs = []
    for _ in range(count):
        op = str(rng.choice(["xw", "xwt", "xtg"]))
        n = int(rng.integers(1, 7))
        m = int(rng.integers(1, cfg.cols + 1))
        k = int(rng.integers(1, cfg.rows + 1)) if op == "xtg" else int(rng.integers(1, 12))
        x = rng.integers(lo, hi + 1, size=(n, k))
        w = rng.integers(lo, hi + 1, size=(n, m) if op == "xtg" else
                         ((k, m) if op == "xw" else (m, k)))
        mask = (rng.random((n, m)) < 0.5) if op != "xtg" and rng.random() < 0.3 else None
        jobs.append(make_job(cfg, op, x, w, shift=int(rng.integers(10, 36)),
                             relu=bool(rng.random() < 0.3), mask=mask, junk=rng))
    return jobs


@pytest.mark.parametrize("seed", range(3))
def test_dce_random_jobs_amaranth_sim(seed):
    cfg = DCE_PRESETS["tiny"]
    rng = np.random.default_rng(seed)
    jobs = _random_jobs(cfg, rng, 10)
    received, stats = _dce_sim(cfg, jobs, rng)
    assert received == _expected_rows(jobs)
    assert stats == [(j.max_abs, j.saturated) for j in jobs]


@pytest.mark.parametrize(("depth", "latency"), [(2, 1), (4, 1), (4, 3), (7, 2)])
def test_stream_reader_under_stalls_and_backpressure(depth, latency):
    """A reader asks only for words it has room for: with a memory that refuses requests
    at random and answers ``latency`` cycles later without waiting, and a consumer that
    is ready at random, every word arrives once, in order, and none is dropped."""
    from mixgcn.hdl.memport import StreamReader

    rng = np.random.default_rng(depth * 10 + latency)
    words = [int(w) for w in rng.integers(0, 1 << 30, 200)]
    memory = {100 + i: w for i, w in enumerate(words)}
    dut = StreamReader(32, addr_width=16, mem_width=32, depth=depth)
    got = []

    async def memory_model(ctx):
        inflight = []  # (cycles to go, word)
        while True:
            ready = int(rng.random() < 0.6)
            ctx.set(dut.mem.req.ready, ready)
            due = [w for t, w in inflight if t == 1]
            inflight = [(t - 1, w) for t, w in inflight if t > 1]
            assert len(due) <= 1
            ctx.set(dut.mem.resp.valid, int(bool(due)))
            ctx.set(dut.mem.resp.payload, due[0] if due else 0)
            asked = ctx.get(dut.mem.req.valid) and ready
            addr = ctx.get(dut.mem.req.payload)
            await ctx.tick()
            if asked:
                inflight.append((latency, memory[addr]))

    async def consumer(ctx):
        ctx.set(dut.ctrl.base, 100)
        ctx.set(dut.ctrl.count, len(words))
        ctx.set(dut.ctrl.start, 1)
        await ctx.tick()
        ctx.set(dut.ctrl.start, 0)
        for _ in range(5000):
            ready = int(rng.random() < 0.5)
            ctx.set(dut.o.ready, ready)
            take = ready and ctx.get(dut.o.valid)
            word = ctx.get(dut.o.payload)
            await ctx.tick()
            if take:
                got.append(word)
            if len(got) == len(words):
                break
        assert ctx.get(dut.done)

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(memory_model, background=True)
    sim.add_testbench(consumer)
    sim.run_until(PERIOD * 6000)
    assert got == words


@pytest.mark.parametrize("divisor", [1, 3, 8, 9, 25])
def test_constant_divider_matches_python(divisor):
    """The host link's sequential divider (a bit a cycle): quotient and remainder of
    edge values and random ones, each ready ``width`` cycles after ``start``."""
    from mixgcn.hdl.host_link import ConstantDivider

    dut = ConstantDivider(16, divisor)
    rng = np.random.default_rng(divisor)
    values = [0, 1, divisor - 1, divisor, divisor + 1, 0xFFFF,
              *rng.integers(0, 1 << 16, 40).tolist()]

    async def tb(ctx):
        for x in values:
            ctx.set(dut.x, x)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 0
            while ctx.get(dut.busy):
                await ctx.tick()
                cycles += 1
            assert cycles == 16
            assert (ctx.get(dut.quotient), ctx.get(dut.remainder)) == divmod(x, divisor), x

    _run(dut, tb)


async def _execute(ctx, dut, seq, kind, payload=b""):
    """A request (header, then payload bytes) into a :class:`RequestExecutor`; its
    answer's header."""
    ctx.set(dut.request.payload, {"seq": seq, "kind": kind, "length": len(payload)})
    ctx.set(dut.request.valid, 1)
    await ctx.tick().until(dut.request.ready)
    ctx.set(dut.request.valid, 0)
    for byte in payload:
        ctx.set(dut.request_payload.payload, byte)
        ctx.set(dut.request_payload.valid, 1)
        await ctx.tick().until(dut.request_payload.ready)
    ctx.set(dut.request_payload.valid, 0)
    ctx.set(dut.answer.ready, 1)
    head = (await ctx.tick().sample(dut.answer.payload).until(dut.answer.valid))[0]
    ctx.set(dut.answer.ready, 0)
    return head


def test_status_block_is_one_cycles_values():
    """The link's STATUS block is written into its answer a byte a cycle while the
    chip's cycle counter runs on: every counter of it must come from the same cycle.
    Here every counter reads the clock's cycle number (carries crossing bytes while
    the block is written), so a block of values from different cycles shows."""
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.hdl.frames import Op, Status
    from mixgcn.hdl.host_link import COUNTER_BYTES, RequestExecutor

    dut = RequestExecutor(CHIP_PRESETS["micro"])
    ll = dut.layouts
    counters = [v for _, _, v in dut.counters.signature.flatten(dut.counters)]
    start = (1 << 16) - 60  # the block's write crosses the low 16 bits' carry
    rng = np.random.default_rng(5)
    blocks = []

    async def clock_counters(ctx):
        t = start
        while True:
            for v in counters:
                ctx.set(v, t % (1 << len(v)))
            await ctx.tick()
            t += 1

    async def host(ctx):
        ctx.set(dut.idle, 1)
        for seq in (1, 2):
            head = await _execute(ctx, dut, seq, Op.STATUS)
            assert (head.seq, head.kind, head.length) == (seq, Status.OK, ll.block_bytes)
            body = []
            while len(body) < ll.block_bytes:
                ready = int(rng.random() < 0.5)
                ctx.set(dut.answer_payload.ready, ready)
                valid, byte = ctx.get(dut.answer_payload.valid), ctx.get(
                    dut.answer_payload.payload)
                await ctx.tick()
                if ready and valid:
                    body.append(byte)
            ctx.set(dut.answer_payload.ready, 0)
            blocks.append(bytes(body))

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(clock_counters, background=True)
    sim.add_testbench(host)
    sim.run_until(PERIOD * 2000)
    assert len(blocks) == 2
    seen = []
    for block in blocks:
        values = [int.from_bytes(block[i * COUNTER_BYTES:(i + 1) * COUNTER_BYTES], "little")
                  for i in range(len(counters))]
        t = values[0]
        assert values == [t % (1 << len(v)) for v in counters], values
        assert block[-1] == 1  # idle, no router error
        seen.append(t)
    assert start <= seen[0] < seen[1]


def _uart_bytes(line: list[int], divisor: int) -> bytes:
    """The bytes on a serial line sampled once a cycle (``divisor`` cycles a bit),
    each bit read in its middle; a byte cut off at the end is left out."""
    out, i = [], 0
    while i < len(line):
        if line[i]:
            i += 1
            continue
        middles = [i + divisor // 2 + k * divisor for k in range(1, 10)]
        if middles[-1] >= len(line):
            break
        assert line[middles[-1]] == 1, f"no stop bit after the byte starting at cycle {i}"
        out.append(sum(line[t] << k for k, t in enumerate(middles[:8])))
        i = middles[-1]
    return bytes(out)


def test_host_link_is_busy_until_its_answer_is_sent():
    """The simulated board runs its clock only while the link says ``busy``
    (sim/board), so from a request's last stop bit until its answer's last, ``busy``
    must not fall for a single cycle. Requests without a payload are the tightest case:
    the header is the frame's last word, and the frame receiver is done once a buffer
    has taken it."""
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.hdl.frames import REQUEST_SYNC, RESPONSE_SYNC, Op, Status
    from mixgcn.hdl.host_link import HostLink
    from mixgcn.host.link import FrameReader, encode

    divisor = 4
    dut = HostLink(CHIP_PRESETS["micro"], divisor)
    damaged = bytearray(encode(REQUEST_SYNC, 2, Op.STATUS))
    damaged[-1] ^= 0x10  # a bit of the CRC
    requests = [(encode(REQUEST_SYNC, 1, Op.STATUS), 1, Status.OK),
                (bytes(damaged), 2, Status.BAD_CHECKSUM),
                (encode(REQUEST_SYNC, 3, 0x7F), 3, Status.BAD_OP)]
    answers = []

    async def tb(ctx):
        ctx.set(dut.idle, 1)
        reader = FrameReader(RESPONSE_SYNC)
        for frame, seq, status in requests:
            line = []
            for byte in frame:
                for bit in (0, *((byte >> k) & 1 for k in range(8)), 1):
                    ctx.set(dut.rx, bit)
                    for _ in range(divisor):
                        line.append(ctx.get(dut.tx))
                        await ctx.tick()
            while ctx.get(dut.busy):
                line.append(ctx.get(dut.tx))
                await ctx.tick()
                assert len(line) < 100_000, "busy never fell"
            frames = reader.feed(_uart_bytes(line, divisor))
            assert [(f.seq, f.kind) for f in frames] == [(seq, status)], \
                f"busy fell {len(line)} cycles in, with the answer to seq {seq} not all sent"
            answers.append(frames[0])
            for _ in range(20 * divisor):  # and nothing more comes
                assert ctx.get(dut.tx) == 1 and not ctx.get(dut.busy)
                await ctx.tick()

    _run(dut, tb)
    assert len(answers) == 3 and len(answers[0].payload) == dut.executor.layouts.block_bytes


@pytest.mark.parametrize("batch", [1, 2, 5])
def test_run_offers_each_descriptor_as_sent(batch):
    """A RUN's descriptors are gathered into a memory, then offered to the chip: each
    must come out as its bytes went in, in order, whatever the batch's size (one
    descriptor is written in the cycle before the batch starts, and read at once), and
    the answer must carry the status records as the chip gave them."""
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.hdl.frames import Op, Status
    from mixgcn.hdl.host_link import RequestExecutor

    dut = RequestExecutor(CHIP_PRESETS["micro"])
    ll = dut.layouts
    rng = np.random.default_rng(batch)
    descs = [int.from_bytes(rng.bytes(ll.desc_bytes), "little")
             % (1 << ll.chip.desc_layout.size) for _ in range(batch)]
    records = [int.from_bytes(rng.bytes(ll.status_bytes), "little")
               % (1 << ll.chip.status_layout.size) for _ in range(batch)]
    offered = []

    async def chip(ctx):
        while len(offered) < batch:
            ready = int(rng.random() < 0.6)
            ctx.set(dut.desc.ready, ready)
            valid, word = ctx.get(dut.desc.valid), ctx.get(dut.desc.payload.as_value())
            await ctx.tick()
            if ready and valid:
                offered.append(word)
                ctx.set(dut.desc.ready, 0)  # while its status record is handed back
                ctx.set(dut.status.payload.as_value(), records[len(offered) - 1])
                ctx.set(dut.status.valid, 1)
                await ctx.tick().until(dut.status.ready)
                ctx.set(dut.status.valid, 0)
        ctx.set(dut.desc.ready, 0)

    async def host(ctx):
        ctx.set(dut.idle, 1)
        payload = b"".join(d.to_bytes(ll.desc_bytes, "little") for d in descs)
        head = await _execute(ctx, dut, 7, Op.RUN, payload)
        assert (head.seq, head.kind) == (7, Status.OK)
        assert head.length == ll.block_bytes + batch * ll.status_bytes
        body = []
        ctx.set(dut.answer_payload.ready, 1)
        while len(body) < head.length:
            valid, byte = ctx.get(dut.answer_payload.valid), ctx.get(dut.answer_payload.payload)
            await ctx.tick()
            if valid:
                body.append(byte)
        got = [int.from_bytes(bytes(body[at:at + ll.status_bytes]), "little")
               for at in range(ll.block_bytes, len(body), ll.status_bytes)]
        assert got == records

    _run(dut, chip, host, deadline=PERIOD * 20_000)
    assert offered == descs


@pytest.mark.parametrize("words", [1, 2, 5])
def test_write_stores_each_word_as_sent(words):
    """A WRITE's payload is an address, then words a byte at a time: each word must reach
    the memory whole, at its own address, in order, while the memory stalls at random
    (a word's "whole" flag a byte early or late writes a word made of two)."""
    from mixgcn.gen.config import CHIP_PRESETS
    from mixgcn.hdl.frames import Op, Status
    from mixgcn.hdl.host_link import RequestExecutor

    dut = RequestExecutor(CHIP_PRESETS["micro"])
    ll = dut.layouts
    rng = np.random.default_rng(10 + words)
    width = ll.chip.mem_width
    sent = [int.from_bytes(rng.bytes(ll.mem_bytes), "little") % (1 << width)
            for _ in range(words)]
    at = 50
    written = []

    async def memory(ctx):
        while True:
            ready = int(rng.random() < 0.4)
            ctx.set(dut.write.wr.ready, ready)
            valid = ctx.get(dut.write.wr.valid)
            addr, word = ctx.get(dut.write.wr.payload.addr), ctx.get(dut.write.wr.payload.data)
            await ctx.tick()
            if ready and valid:
                written.append((addr, word))

    async def host(ctx):
        ctx.set(dut.idle, 1)
        payload = at.to_bytes(4, "little") + b"".join(
            w.to_bytes(ll.mem_bytes, "little") for w in sent)
        head = await _execute(ctx, dut, 3, Op.WRITE, payload)
        assert (head.seq, head.kind, head.length) == (3, Status.OK, 0)

    sim = Simulator(dut)
    sim.add_clock(PERIOD)
    sim.add_testbench(memory, background=True)
    sim.add_testbench(host)
    sim.run_until(PERIOD * 20_000)
    assert written == [(at + i, w) for i, w in enumerate(sent)]

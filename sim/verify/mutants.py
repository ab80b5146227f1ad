"""Mutation testing of ``hdl/`` (and the simulation's memory model): does a one-line
change of the hardware fail a test?

Each :class:`Mutant` replaces one fragment of one line of ``hdl/`` (or of
``sim/chip/mixgcn_memory.v``) and names the quickest tests that must catch it
(amaranth.sim unit tests and formal proofs: seconds, no simulator build). ``python -m
mixgcn.sim.verify.mutants`` (``make mutants``) copies the package to a scratch folder,
checks that the named tests pass on the unmutated copy, then applies each mutant alone
and runs its tests; it prints a table and exits non-zero if any mutant survives (or
its tests could not run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MUTANTS", "Mutant", "main", "run_mutants"]

PACKAGE = Path(__file__).resolve().parent.parent.parent  # the package root (mixgcn)


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the package root
    original: str  # found exactly once in the file
    mutated: str
    tests: tuple[str, ...]  # pytest node ids (relative to the package root)
    breaks: str  # what the change breaks


# the named tests take seconds; past this a mutant has hung them
MUTANT_TIMEOUT_S = 300

_UNITS = "tests/test_hdl_units.py"
_PARTS = "tests/test_hdl_components.py"
_FORMAL = "tests/test_formal.py::test_proof"
_FABRIC = "tests/test_fabric.py"
_MEMORY = "tests/test_chip_cocotb.py::test_memory_model_cocotb"
_UART = "tests/test_link.py::test_uart_cocotb[16]"
_FRAMES = "tests/test_link.py::test_frames_cocotb"
_BOARD = "tests/test_board_link.py"
_DRAM = "tests/test_dram.py::test_bridge_on_litedram_random_traffic"

MUTANTS = [
    Mutant("rounding", "hdl/output_stage.py",
           "r2[j].eq(q1[j] + (round1[j] & (sticky1[j] | q1[j][0])))",
           "r2[j].eq(q1[j] + round1[j])",
           (f"{_UNITS}::test_output_stage_at_its_bounds",),
           "round half to even becomes round half up"),
    Mutant("saturation-high", "hdl/output_stage.py",
           "too_big = ~fits & ~negative", "too_big = ~negative",
           (f"{_UNITS}::test_output_stage_at_its_bounds",),
           "every positive output is clipped to the largest value"),
    Mutant("saturation-low", "hdl/output_stage.py",
           "fits = upper.all() | ~upper.any()", "fits = ~upper.any()",
           (f"{_UNITS}::test_output_stage_at_its_bounds",),
           "no negative output fits: each is clipped to the smallest value"),
    Mutant("relu", "hdl/output_stage.py",
           "Mux(relu[2] & negative, 0,", "Mux(relu[2], 0,",
           (f"{_UNITS}::test_output_stage_at_its_bounds",),
           "ReLU zeroes positive outputs too"),
    Mutant("fence", "hdl/controller.py",
           "engine_free & (~head.fence | all_done)", "engine_free & 1",
           (f"{_PARTS}::test_a_fence_waits_for_everything_before_it",),
           "a fence no longer waits for the descriptors before it"),
    Mutant("sequence-number", "hdl/controller.py",
           "self.record.seq.eq(self.seq)", "self.record.seq.eq(self.seq + 1)",
           (f"{_PARTS}::test_controller_issues_in_order_and_reports_every_descriptor",),
           "status records carry the next descriptor's number"),
    Mutant("status-hold", "hdl/controller.py",
           "advance = ~self.status.valid | self.status.ready",
           "advance = ~self.status.valid | 1",
           (f"{_FORMAL}[controller]",),
           "a status record waiting for the host is replaced by the next"),
    Mutant("follow", "hdl/sae.py",
           "(b.col[e] < self.loaded)", "(b.col[e] <= self.loaded)",
           (f"{_PARTS}::test_sae_against_golden",
            f"{_PARTS}::test_sae_follows_slow_loads_across_commands",
            f"{_FORMAL}[sparse_engine]"),
           "a following SPMM gathers a row the loader has not written yet (or is writing)"),
    Mutant("sae-partial-collision", "hdl/sae.py",
           "fed_row.eq(s3_row)]", "fed_row.eq(s3_row + 1)]",
           (f"{_FORMAL}[sparse_engine]", f"{_PARTS}::test_sae_in_column_windows"),
           "a row's sum is kept as the next row's, which may be read in that cycle"),
    Mutant("beat-split", "hdl/sae.py",
           "s1_lo[e].eq(~beat.last | (e < beat.split))",
           "s1_lo[e].eq(~beat.last | (e <= beat.split))",
           (f"{_PARTS}::test_sae_against_golden",),
           "a beat's first pair of the next row is added to the row it ends"),
    Mutant("sae-credit", "hdl/sae.py", "self.commit.eq(self.row & ~self.keep)]",
           "self.commit.eq(0)]",
           (f"{_FORMAL}[sparse_engine]",),
           "the SAE admits rows without spending credit: a row can be lost"),
    Mutant("reader-room", "hdl/memport.py",
           "(fifo.level + inflight < self.depth)", "(fifo.level + inflight <= self.depth)",
           (f"{_FORMAL}[stream_reader]",),
           "a reader asks for a word it has no room for"),
    Mutant("reader-asking", "hdl/memport.py",
           "asking.eq(to_ask != 1)", "asking.eq(to_ask != 0)",
           (f"{_FORMAL}[stream_reader]",),
           "a reader asks for one word more than it was told to read"),
    Mutant("writer-address", "hdl/memport.py",
           "with m.Elif(wr.valid & wr.ready):", "with m.Elif(wr.valid):",
           (f"{_FORMAL}[stream_writer]",),
           "a writer moves on to the next address before its write is taken"),
    Mutant("router-priority", "hdl/router.py",
           "dce_xchg = route.dce_to_xchg & ~route.sae_to_xchg", "dce_xchg = route.dce_to_xchg",
           (f"{_FORMAL}[exchange_router]",
            f"{_PARTS}::test_two_producers_raise_the_error_and_lose_no_row"),
           "a second producer is not held: two engines' rows mix in the exchange"),
    Mutant("router-fork", "hdl/router.py",
           "pipe_taken.eq(pipe_taken | (pipe_valid & into_pipe.ready))",
           "pipe_taken.eq(pipe_taken)",
           (f"{_FORMAL}[pipeline_fifo]",),
           "the exchange branch of a fork forgets it took the row: duplicates"),
    Mutant("router-held-ready", "hdl/router.py",
           "out.ready.eq(~(wants & ~has) & (to_mem | has)", "out.ready.eq((to_mem | has)",
           (f"{_FORMAL}[exchange_router]",
            f"{_PARTS}::test_two_producers_raise_the_error_and_lose_no_row"),
           "a producer held off the exchange is still told ready: its rows are lost"),
    Mutant("skid-spare", "hdl/timing.py", "Mux(self.spare_valid_copy, spare, i.payload)",
           "Mux(self.spare_valid_copy, i.payload, i.payload)",
           (f"{_FORMAL}[skid_buffer]", "tests/test_chip_cocotb.py::test_chip_cocotb[tiny]"),
           "an input buffer forgets the word it held aside: it is lost, the next one doubled"),
    Mutant("skid-spare-free", "hdl/timing.py", "with m.If(~self.spare_valid_copy):",
           "with m.If(1):", (f"{_FORMAL}[skid_buffer]",),
           "an input buffer's spare word is overwritten while it waits"),
    Mutant("skid-output-empty", "hdl/timing.py", "with m.If(~self.o_valid_copy | o.ready):",
           "with m.If(o.ready):", (f"{_FORMAL}[skid_buffer]",),
           "an input buffer's empty output register takes a word only when it is taken"),
    Mutant("skid-copy-late", "hdl/timing.py", "self.o_valid_copy.eq(o_valid_next)",
           "self.o_valid_copy.eq(o.valid)", (f"{_FORMAL}[skid_buffer]",),
           "the copy that steers an input buffer's output word lags its flag by a cycle"),
    Mutant("skid-unmarked", "hdl/timing.py", 'self.o_valid_reg = copy(1, name="o_valid_reg")',
           'self.o_valid_reg = Signal(name="o_valid_reg")',
           ("tests/test_board.py::test_a_skid_buffers_words_are_steered_by_copies_of_its_flags",),
           "a skid buffer's output flag unmarked: yosys merges it into its copy, and one "
           "LUT steers both the flags and the words again"),
    Mutant("ring-produce", "hdl/timing.py", "with m.If(taken):", "with m.If(i.valid):",
           (f"{_FORMAL}[ring_buffer]", f"{_UNITS}::test_dce_random_jobs_amaranth_sim"),
           "a ring buffer moves on to the next slot when a word is offered but not taken: "
           "a word is lost, or one left behind"),
    Mutant("ring-slot-busy", "hdl/timing.py", "with m.If(self.produce[k]):",
           "with m.If(self.produce[k] | self.consume[k]):",
           (f"{_FORMAL}[ring_buffer]",),
           "a ring buffer's slots take the incoming word while they hold the oldest"),
    Mutant("ring-two", "hdl/timing.py", "two.eq(o_valid & ~o.ready & (two | i.valid))",
           "two.eq(o_valid & ~o.ready & i.valid)",
           (f"{_FORMAL}[ring_buffer]",),
           "a ring buffer holding two words forgets it is full while none leaves: "
           "a third comes and overwrites the oldest"),
    Mutant("fifo-collision", "hdl/timing.py", "w.ready.eq(self.has_room)",
           "w.ready.eq(self.has_room | read)",
           (f"{_FORMAL}[block_ram_fifo]",
            f"{_PARTS}::test_block_ram_fifo_hands_on_every_word_in_order"),
           "a full block-RAM FIFO takes a word in the cycle one leaves its RAM: the write "
           "meets the read of its address, which the board flow builds without collision "
           "logic"),
    Mutant("fifo-room-late", "hdl/timing.py", "self.has_room.eq(stored != depth)",
           "self.has_room.eq(self.stored != depth)",
           (f"{_FORMAL}[block_ram_fifo]",
            f"{_PARTS}::test_block_ram_fifo_hands_on_every_word_in_order"),
           "the FIFO's room is the last cycle's: a full FIFO still takes a word, which "
           "overwrites the oldest"),
    Mutant("fifo-bubble", "hdl/timing.py",
           "read = (self.stored != 0) & (~self.head_valid | advance)",
           "read = (self.stored != 0) & ~self.head_valid",
           (f"{_FORMAL}[block_ram_fifo]", f"{_PARTS}::test_block_ram_fifo_runs_at_full_rate"),
           "the block-RAM FIFO reads its RAM only into an empty head: a bubble after every "
           "word when the consumer keeps up, the exchange at half rate"),
    Mutant("weights-collision", "hdl/dce.py",
           "[want.eq(1), blocked.eq(inputs_ok",
           "[want.eq(1), store.valid.eq(b.valid), blocked.eq(inputs_ok",
           (f"{_FORMAL}[dense_engine]",),
           "the weight store also takes B words while the array reads it: a read the board "
           "flow builds without collision logic meets a write"),
    Mutant("weights-settle", "hdl/dce.py", 'm.next = "SETTLE"', 'm.next = "STREAM"',
           (f"{_FORMAL}[dense_engine]",),
           "the stream starts while the load's last word is still being written: its "
           "first read may meet that write"),
    Mutant("router-consumers", "hdl/router.py",
           "self.error.consumers.eq(1)", "self.error.producers.eq(1)",
           (f"{_PARTS}::test_two_consumers_raise_the_error_and_duplicate_no_row",),
           "two consumers are reported as two producers"),
    Mutant("output-credit", "hdl/output_stage.py",
           "self.credit.eq(self.inflight < self.depth)",
           "self.credit.eq(self.inflight <= self.depth)",
           (f"{_FORMAL}[output_path]",),
           "the output path grants one row more credit than it has room"),
    Mutant("sae-in-flight", "hdl/sae.py", "+ (r_valid & r_last)", "+ 0",
           (f"{_FORMAL}[sparse_engine]",),
           "a row in the SAE's gathered-rows register is not counted as in flight"),
    Mutant("output-fifo-room", "hdl/output_stage.py",
           "depth=depth + 1)", "depth=depth - 1)",
           (f"{_FORMAL}[output_path]",),
           "the output FIFO is smaller than the credit: a row leaving the stage, which "
           "never stops, finds no room and is lost"),
    Mutant("dce-credit", "hdl/dce.py", "path.commit.eq(last_chunk),", "path.commit.eq(0),",
           (f"{_FORMAL}[dense_engine]",),
           "the DCE admits rows without spending credit: a row can be lost"),
    Mutant("dce-tree-in-flight", "hdl/dce.py",
           "sum(f[2] for f in flags)", "sum(f[2] for f in flags[:3])",
           (f"{_FORMAL}[dense_engine]",),
           "rows in the column-sum tree are not counted in flight: the credit overstates room"),
    Mutant("dce-live-rows", "hdl/dce.py", "Cat(*(base + R + r < k for r in range(R)))",
           "Cat(*(base + r < k for r in range(R)))",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "the rows of the next chunk inside the reduction are reckoned from this chunk's "
           "first index (a last chunk keeps rows past the reduction)"),
    Mutant("dce-one-left", "hdl/dce.py",
           "m.d.sync += [none_left.eq(one_left), one_left.eq(rows_left == 2)]",
           "m.d.sync += [none_left.eq(one_left), one_left.eq(rows_left == 1)]",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "the DCE marks the wrong row of a stream as its last"),
    Mutant("column-first", "hdl/dce.py",
           "Mux(first, 0, col_acc[x])", "Mux(first, col_acc[x], 0)",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "a column accumulator restarts on every chunk of a row but the first"),
    Mutant("dce-cell-en", "hdl/dce.py", "cell.en.eq(flags[2][0] & self.xtg)",
           "cell.en.eq(self.xtg)",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "an Xᵀ·G cell adds the products of cycles without an accepted word (s1 takes "
           "whatever is on its inputs every cycle)"),
    Mutant("column-valid", "hdl/dce.py", "with m.If(valid):", "with m.If(1):",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "a column accumulator adds the products of cycles without a word"),
    Mutant("reader-output", "hdl/memport.py",
           "fifo.r_en.eq(~self.o.valid | self.o.ready),", "fifo.r_en.eq(1),",
           (f"{_FORMAL}[stream_reader]",),
           "the reader overwrites a word its consumer has not taken"),
    Mutant("weight-address", "hdl/dce.py",
           "m.d.sync += addr.eq(chunk)", "m.d.sync += addr.eq(chunk + 1)",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "weights are stored one chunk off"),
    Mutant("mac-shift", "hdl/mac.py",
           "self.acc.eq(self.below)", "self.acc.eq(self.acc)",
           (f"{_UNITS}::test_mac_cell_matches_model",),
           "an accumulator does not move up its column when it drains"),
    Mutant("dsp-sign", "hdl/mac.py", 'f"i_B{i}": b[min(i, self.width - 1)]',
           'f"i_B{i}": b[i] if i < self.width else 0',
           (f"{_FORMAL}[dsp_multiplier_5]",),
           "the ECP5 multiplier's B operand loses its sign extension (the top pins read 0)"),
    Mutant("dsp-pins", "hdl/mac.py", 'f"i_A{i}": a[min(i, self.width - 1)]',
           'f"i_A{i}": a[min(i ^ 1, self.width - 1)]',
           (f"{_FORMAL}[dsp_multiplier_16_one_hot]",),
           "the ECP5 multiplier's A operand bits are wired to swapped pins"),
    Mutant("drain-last", "hdl/dce.py",
           "drain_last.eq(self.drain_row + 1 == self.k)", "drain_last.eq(self.drain_row == self.k)",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "an Xᵀ·G tile's last row is not marked last"),
    Mutant("sae-loaded", "hdl/sae.py",
           "inputs_ok = held & rows_in &", "inputs_ok = held &",
           (f"{_PARTS}::test_sae_against_golden",),
           "a beat gathers feature rows the loader has not written yet"),
    Mutant("sae-rows-recheck", "hdl/sae.py",
           "rows_in.eq(rows_loaded(beat))", "rows_in.eq(1)",
           (f"{_FORMAL}[sparse_engine]", f"{_PARTS}::test_sae_follows_slow_loads_across_commands"),
           "a beat waiting for its rows is taken a cycle later whether they are loaded "
           "or not"),
    Mutant("sae-held-end", "hdl/sae.py",
           "(self.accept & ~ends))", "(self.accept))",
           (f"{_PARTS}::test_sae_follows_slow_loads_across_commands",),
           "the next command's first beat is checked against the last command's fill"),
    Mutant("sae-bank-read", "hdl/sae.py", "r_data[1][e][lane],", "r_data[0][e][lane],",
           (f"{_PARTS}::test_sae_against_golden",),
           "every lane multiplies bank 0's rows, whichever bank the command reads"),
    Mutant("sae-bank-write", "hdl/sae.py",
           "loader.write.en & (loader.fill_bank == b)", "loader.write.en & (b == 0)",
           (f"{_PARTS}::test_sae_against_golden",),
           "every load fills bank 0"),
    Mutant("link-credit", "hdl/fabric.py",
           "m.d.sync += credit.eq(credit - send + self.wire.credit)",
           "m.d.sync += credit.eq(credit - send)",
           (f"{_FABRIC}::test_fabric_at_full_speed",),
           "a link never gets its credits back: it stalls after its receiver's buffer"),
    Mutant("bridge-depth", "hdl/board.py",
           "self.depth = credits + peer_credits", "self.depth = max(credits, peer_credits) // 2",
           (f"{_FABRIC}::test_boards_on_pins_at_full_speed_never_overrun",),
           "a board's incoming FIFO is shallower than the words that can be in flight"),
    Mutant("bridge-credit", "hdl/board.py",
           "self.to_peer.credit.eq(fifo.r_rdy & word.credit)",
           "self.to_peer.credit.eq(fifo.r_rdy & word.valid)",
           (f"{_FABRIC}::test_boards_on_pins_at_full_speed_never_overrun",),
           "a board counts the other's flits as credits of its own link"),
    # timing step 13: registered control copies, the controller's head register, the
    # DCE's drain register and the weight store's look-ahead flags
    Mutant("mac-clear-flight", "hdl/mac.py",
           "o_valid.eq(self.en & ~self.clear)", "o_valid.eq(self.en)",
           (f"{_UNITS}::test_mac_cell_matches_model",),
           "a clear no longer cancels the product of operands presented with it"),
    Mutant("dce-drain-flight", "hdl/dce.py",
           "sum(f[2] for f in flags) + drain + self.feed.valid",
           "sum(f[2] for f in flags) + self.feed.valid",
           (f"{_FORMAL}[dense_engine]",),
           "a drained row in the array's drain register is not counted as in flight"),
    Mutant("controller-head", "hdl/controller.py",
           "queue.r_stream.ready.eq(~staged)", "queue.r_stream.ready.eq(1)",
           (f"{_PARTS}::test_controller_issues_in_order_and_reports_every_descriptor",),
           "the head register takes a new descriptor over one not yet issued"),
    Mutant("controller-none", "hdl/controller.py",
           "none_expected.eq(Mux(fields.unit == Unit.FENCE, 1, rows == 0))",
           "none_expected.eq(Mux(fields.unit == Unit.FENCE, 1, 0))",
           (f"{_PARTS}::test_controller_issues_in_order_and_reports_every_descriptor",),
           "an operation of no rows waits for a row that never comes"),
    Mutant("tracker-row", "hdl/controller.py", "m.d.sync += row.eq(self.report.row)",
           "m.d.sync += row.eq(0)",
           (f"{_PARTS}::test_controller_issues_in_order_and_reports_every_descriptor",),
           "a unit tracker no longer counts its engine's rows"),
    Mutant("weight-last", "hdl/dce.py",
           "last_word.eq(words + 2 >= k)", "last_word.eq(words + 1 >= k)",
           (f"{_UNITS}::test_dce_random_jobs_amaranth_sim",),
           "the weight store ends an X·W load a word early"),
    Mutant("sae-lane-end", "hdl/sae.py",
           "*(x.eq(s2_valid & s2_last) for x in lane_end)",
           "*(x.eq(s2_valid) for x in lane_end)",
           (f"{_PARTS}::test_sae_against_golden",),
           "each SAE lane ends a row on every beat"),
    Mutant("sae-one-left", "hdl/sae.py", "one_left.eq(rows_left == 2)]",
           "one_left.eq(rows_left == 1)]",
           (f"{_PARTS}::test_sae_against_golden",),
           "the SAE marks the wrong row as its command's last"),
    Mutant("sae-buffer-lane", "hdl/sae.py", "wdata[lane].eq(loader.write.data[lane])",
           "wdata[lane].eq(loader.write.data[lane // 2 * 2])",
           (f"{_PARTS}::test_sae_against_golden",),
           "a lane's memory of the feature buffer stores its neighbour's value"),
    Mutant("sae-partial-add", "hdl/sae.py",
           "x.eq(self.accumulate & g_last) for x in lane_add",
           "x.eq(0) for x in lane_add",
           (f"{_PARTS}::test_sae_in_column_windows",),
           "a window's row sums never add the partial sums kept from the windows before"),
    Mutant("sae-partial-keep", "hdl/sae.py", "self.feed.valid.eq(fed & ~self.keep)",
           "self.feed.valid.eq(fed)",
           (f"{_PARTS}::test_sae_in_column_windows",),
           "a kept row also leaves for the output stage"),
    Mutant("sae-partial-row", "hdl/sae.py", "m.d.sync += row_at.eq(row_at + 1)",
           "m.d.sync += row_at.eq(row_at)",
           (f"{_PARTS}::test_sae_in_column_windows",),
           "every row of a command keeps its partial sum in the same place"),
    Mutant("keep-apart", "hdl/timing.py", "%ci:+[Q]", "%ci:+[D]",
           ("tests/test_board.py::test_the_mac_cells_keep_their_own_control_registers",),
           "the board flow no longer keeps the control copies' flip-flops apart"),
    Mutant("one-hot", "hdl/timing.py", 'w:*{ONE_HOT}_state', 'w:*{ONE_HOT}_status',
           ("tests/test_board.py::test_the_request_executor_is_built_one_hot",),
           "the board flow's mark misses the state machines named for it (built binary)"),
    # the simulation's memory model (its profiles are what cycle counts assume)
    Mutant("memory-burst-turn", "sim/chip/mixgcn_memory.v",
           "                            next_turn = CW'(c);",
           "                            next_turn = CW'((c + 1) % N);",
           (_MEMORY,), "a channel loses its turn inside its burst: bursts reopen"),
    Mutant("memory-credit", "sim/chip/mixgcn_memory.v",
           "if (avail >= cost) begin", "if (avail + 64 >= cost) begin",
           (_MEMORY,), "the memory moves words it has not earned the bandwidth for"),
    Mutant("dram-tag", "hdl/dram.py", "channel.eq(tags.r_data)]", "channel.eq(0)]", (_DRAM,),
           "every word the DRAM returns goes to the first read channel"),
    Mutant("dram-outstanding", "hdl/dram.py", "room = Cat(*(tags_room if i < n_read",
           "room = Cat(*(1 if i < n_read", (_DRAM,),
           "reads go out with no room for their tags: a full tag FIFO drops channels"),
    Mutant("dram-order", "hdl/dram.py", "blocked[i].eq(must_wait.any())", "blocked[i].eq(0)",
           (_DRAM,),
           "requests go in round-robin order only: a read asked after a write was taken "
           "may reach the DRAM first and read the old word"),
    Mutant("uart-rx-middle", "hdl/uart.py", "timer.eq(d // 2 - 1)", "timer.eq(0)", (_UART,),
           "the receiver samples each bit at its start, not its middle"),
    Mutant("uart-rx-overrun", "hdl/uart.py",
           "with m.If(self.bytes.valid & ~self.bytes.ready):",
           "with m.If(self.bytes.valid & ~self.bytes.ready & 0):", (_UART,),
           "a byte that completes while the last one waits overwrites it, unreported"),
    Mutant("uart-tx-gap", "hdl/uart.py", "((left == 1) & (timer == 0))", "0", (_UART,),
           "the transmitter idles a bit between back-to-back bytes"),
    Mutant("frames-crc", "hdl/frames.py", "with m.If(Cat(crc_low, byte) != crc):",
           "with m.If(0):",
           (_FRAMES,), "a request whose CRC is wrong is delivered"),
    Mutant("frames-check", "hdl/frames.py",
           "with m.If((byte != crc[:8]) | (head.length > self.max_payload)):",
           "with m.If(head.length > self.max_payload):", (_FRAMES,),
           "a request whose header check is wrong is taken on"),
    Mutant("frames-crc-order", "hdl/frames.py", 'emit(crc[:8], "crc1", crc_it=False)',
           'emit(crc[8:], "crc1", crc_it=False)', (_FRAMES,),
           "an answer's CRC goes out high byte first"),
    Mutant("link-replay", "hdl/host_link.py",
           "with m.Elif(kept_valid & (p.seq != 0) & (p.seq == kept_seq)):",
           "with m.Elif(0):",
           (f"{_BOARD}::test_a_lost_answer_is_asked_again_and_a_run_runs_once",),
           "a request sent again after a lost answer is carried out again (a RUN runs "
           "twice)"),
    Mutant("link-keep-damaged", "hdl/host_link.py",
           "answer(Status.BAD_CHECKSUM, kept=False)", "answer(Status.BAD_CHECKSUM)",
           (f"{_BOARD}::test_the_board_refuses_what_it_cannot_do_and_does_none_of_it",),
           "the answer to a damaged request replaces the kept one"),
    Mutant("link-write-range", "hdl/host_link.py",
           "            with m.State(\"write_check\"):\n"
           "                with m.If(past_end):",
           "            with m.State(\"write_check\"):\n                with m.If(0):",
           (f"{_BOARD}::test_the_board_refuses_what_it_cannot_do_and_does_none_of_it",),
           "a WRITE past the memory's end is carried out (wrapping to its start)"),
    Mutant("link-status-live", "hdl/host_link.py", "snapshot.word_select(block_at, 8)",
           "block.word_select(block_at, 8)",
           (f"{_UNITS}::test_status_block_is_one_cycles_values",),
           "the status block's bytes come from the cycles they are written in, not from "
           "one cycle (a counter torn across a carry)"),
    Mutant("link-ser-empty", "hdl/host_link.py", "ser_empty.eq(ser_left == 1)",
           "ser_empty.eq(ser_left == 2)",
           (f"{_BOARD}::test_words_written_are_read_back_under_memory_stalls",),
           "the answer's shift register counts itself empty a byte early (each word's or "
           "record's last byte is never written)"),
    Mutant("link-word-whole", "hdl/host_link.py", "word_full.eq(got == ll.mem_bytes - 1)",
           "word_full.eq(got == ll.mem_bytes)",
           (f"{_UNITS}::test_write_stores_each_word_as_sent",),
           "a WRITE's memory word counts as whole a byte late: each takes the next one's "
           "first byte"),
    Mutant("link-word-last-byte", "hdl/host_link.py",
           "with m.If(~shift_word):  # its last byte is in", "with m.If(1):",
           (f"{_UNITS}::test_write_stores_each_word_as_sent",),
           "a WRITE's memory word goes out when its flag is set, a cycle before its last "
           "byte is shifted in"),
    Mutant("link-desc-last-byte", "hdl/host_link.py",
           "with m.If(desc_full & ~shift_desc):", "with m.If(desc_full):",
           (f"{_UNITS}::test_run_offers_each_descriptor_as_sent",),
           "a RUN's descriptor is written when its flag is set, a cycle before its last "
           "byte is shifted in"),
    Mutant("link-desc-whole", "hdl/host_link.py", "desc_full.eq(got == ll.desc_bytes - 1)",
           "desc_full.eq(got == ll.desc_bytes)",
           (f"{_UNITS}::test_run_offers_each_descriptor_as_sent",),
           "a RUN's descriptor counts as whole a byte late: each takes the next one's "
           "first byte"),
    Mutant("link-gathered", "hdl/host_link.py", 'm.next = "gathered"', 'm.next = "run"',
           (f"{_UNITS}::test_run_offers_each_descriptor_as_sent",),
           "a RUN starts in the cycle its last descriptor is written, and a batch of one "
           "offers what its memory held before"),
    Mutant("link-buffer-busy", "hdl/host_link.py", "| tx.busy | Cat(*buffered).any())",
           "| tx.busy)",
           (f"{_UNITS}::test_host_link_is_busy_until_its_answer_is_sent",),
           "the link counts itself idle while a request's header waits in the buffer "
           "before the executor (the simulated board stops its clock mid-request)"),
]


def _copy_package(dest: Path) -> Path:
    """The package's sources (not its caches, builds or virtual environment) under
    ``dest/mixgcn``, importable as ``mixgcn`` with ``dest`` on the path."""
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "bench", "__pycache__",
                                    ".pytest_cache", ".ruff_cache", "*.egg-info")
    root = dest / "mixgcn"
    shutil.copytree(PACKAGE, root, ignore=ignore)
    return root


def _pytest(root: Path, tests) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root.parent), env.get("PYTHONPATH", "")])
    env["MIXGCN_BUILD"] = str(root.parent / "build")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-W", "error", "-p", "no:cacheprovider",
           *tests]
    try:
        return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                              timeout=MUTANT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # a mutant that hangs its tests is not killed by them: no verdict (an error)
        return subprocess.CompletedProcess(cmd, returncode=-1, stdout=(
            f"the tests ran past {MUTANT_TIMEOUT_S} s (a test that hangs on a fault "
            "should fail instead)"), stderr="")


def _apply(root: Path, m: Mutant) -> str:
    path = root / m.file
    text = path.read_text()
    if text.count(m.original) != 1:
        raise ValueError(f"mutant {m.name}: {m.original!r} occurs {text.count(m.original)} "
                         f"times in {m.file} (expected once)")
    path.write_text(text.replace(m.original, m.mutated))
    return text


def run_mutants(mutants=MUTANTS, log=print) -> list[dict]:
    """Run each mutant's tests on a scratch copy with it applied; a row per mutant:
    name, file, killed (True/False/None: could not run), seconds, detail."""
    with tempfile.TemporaryDirectory(prefix="mixgcn-mutants-") as tmp:
        root = _copy_package(Path(tmp))
        tests = sorted({t for m in mutants for t in m.tests})
        base = _pytest(root, tests)
        if base.returncode != 0:
            raise RuntimeError("the mutants' tests fail on the unmutated design:\n"
                               + base.stdout[-3000:])
        rows = []
        for m in mutants:
            original = _apply(root, m)
            t0 = time.perf_counter()
            try:
                r = _pytest(root, m.tests)
            finally:
                (root / m.file).write_text(original)
            # pytest: 1 = tests failed (killed); 0 = passed (survived); else: no verdict
            killed = {0: False, 1: True}.get(r.returncode)
            failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
            rows.append(dict(name=m.name, file=m.file, killed=killed,
                             seconds=time.perf_counter() - t0, tests=m.tests,
                             breaks=m.breaks,
                             detail=failed[0] if failed else r.stdout.strip()[-200:]))
            verdict = {True: "killed", False: "SURVIVED", None: "ERROR"}[killed]
            log(f"  {m.name:<18} {verdict}  ({rows[-1]['seconds']:.1f} s)")
        return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mixgcn-mutants", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=[m.name for m in MUTANTS],
                   help="run only these mutants (repeatable)")
    args = p.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    print(f"mutants: {len(chosen)} single-line mutations of hdl/", flush=True)
    rows = run_mutants(chosen)
    print(f"\n{'mutant':<18} {'file':<22} {'verdict':<9} {'s':>5}  killed by / breaks")
    for r in rows:
        verdict = {True: "killed", False: "SURVIVED", None: "ERROR"}[r["killed"]]
        print(f"{r['name']:<18} {r['file']:<22} {verdict:<9} {r['seconds']:>5.1f}  "
              f"{', '.join(t.split('::')[-1] for t in r['tests'])} — {r['breaks']}")
    survivors = [r["name"] for r in rows if not r["killed"]]
    print(f"\n{len(rows) - len(survivors)} of {len(rows)} mutants killed"
          + (f"; not killed: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())

// Simulation model of the chip's memory (mixgcn.hdl.memport): NR read channels and NW
// write channels, each asking for one MW-bit word a cycle. Python loads and reads the
// array `mem` in bulk through the simulator; nothing here waits on Python.
//
// The memory's profile (mixgcn.gen.config.MemoryProfile, docs/memory.md), set by the
// harness between batches, never while a word is in flight:
// - `bandwidth`: bits a cycle shared by every channel; 0: no limit, every channel may
//   move a word every cycle. Otherwise the memory earns `bandwidth` bits of credit a
//   cycle and a word costs MW bits, so it moves bandwidth/MW words a cycle on average;
// - `burst_shift`, `burst_cycles`: the memory holds one burst open (2^burst_shift
//   words, aligned, of one channel); a word outside it opens its own burst at
//   burst_cycles cycles' worth of credit more (a DRAM page switch). burst_cycles 0:
//   no bursts;
// - `latency`: a read returns its word `latency` cycles after the request is taken
//   (1..LMAX; 0 counts as 1), words of a channel in order.
// Arbitration, when bandwidth is limited: channels are served in round-robin order
// from `turn`, strictly — a channel that cannot afford its word yet stops the channels
// after it, so a costly word is never starved by cheap ones — and the channel of the
// open burst keeps its turn until its next word would leave the burst.
//
// Random stalls: with `rd_stall` = s, each read channel refuses a request in a cycle
// with probability s/256; with `wr_stall` = s, each write channel refuses a write. Each
// channel draws from its own 16-bit LFSR seeded from SEED, so testbenches get seeded
// random stalls on the chip's inputs and backpressure on its outputs, independently,
// at full simulation speed. A stalled channel passes its turn.
//
// `words_read`, `words_written`: the words the channels moved since reset;
// `words_distinct`: the reads of a word not read since the last `forget` (a batch's
// reads, each word counted once: the traffic if nothing were read twice).
//
// Bulk transfers: a cycle with `load` reads the hex file named by the plusarg
// +MIXGCN_MEM_LOAD= (`@address` lines place the words) into the array; a cycle with
// `dump` writes words `dump_first`..`dump_last` to the file +MIXGCN_MEM_DUMP= names.
// Python writes and reads files instead of one simulator call per word.
module mixgcn_memory #(
    parameter AW = 16,
    parameter MW = 64,
    parameter NR = 1,
    parameter NW = 1,
    parameter SEED = 16'hACE1,
    parameter LMAX = 64
) (
    input                   clk,
    input                   rst,
    input      [7:0]        rd_stall,
    input      [7:0]        wr_stall,
    input      [16:0]       bandwidth,
    input      [6:0]        latency,
    input      [4:0]        burst_shift,
    input      [7:0]        burst_cycles,
    input      [NR-1:0]     rd_req_valid,
    output reg [NR-1:0]     rd_req_ready,
    input      [NR*AW-1:0]  rd_req_addr,
    output reg [NR-1:0]     rd_resp_valid,
    output reg [NR*MW-1:0]  rd_resp_data,
    input      [NW-1:0]     wr_valid,
    output reg [NW-1:0]     wr_ready,
    input      [NW*AW-1:0]  wr_addr,
    input      [NW*MW-1:0]  wr_data,
    input                   load,
    input                   dump,
    input      [AW-1:0]     dump_first,
    input      [AW-1:0]     dump_last,
    input                   forget,
    output reg [47:0]       words_read,
    output reg [47:0]       words_written,
    output reg [47:0]       words_distinct
);
    localparam N = NR + NW;
    reg [MW-1:0] mem [0:(1<<AW)-1];
    string load_path, dump_path;
    initial begin
        if (!$value$plusargs("MIXGCN_MEM_LOAD=%s", load_path))
            load_path = "mixgcn_mem_load.hex";
        if (!$value$plusargs("MIXGCN_MEM_DUMP=%s", dump_path))
            dump_path = "mixgcn_mem_dump.hex";
    end
    reg [16*N-1:0] lfsr;
    integer i, j, c;

    // the words read since `forget`: a word is fresh when its tag is not the current
    // one (so `forget` costs one increment, not a sweep of the memory)
    reg [31:0] seen [0:(1<<AW)-1];
    reg [31:0] tag;
    reg [NR-1:0] fresh;  // a channel's word is fresh, and no channel before it asked for it
    always @* begin
        for (i = 0; i < NR; i = i + 1) begin
            fresh[i] = rd_req_valid[i] && rd_req_ready[i]
                       && seen[rd_req_addr[AW*i +: AW]] != tag;
            for (j = 0; j < i; j = j + 1)
                if (rd_req_valid[j] && rd_req_ready[j]
                        && rd_req_addr[AW*j +: AW] == rd_req_addr[AW*i +: AW])
                    fresh[i] = 0;
        end
    end

    // every channel's request and address, reads first
    wire [N-1:0] req = {wr_valid, rd_req_valid};
    wire [N*AW-1:0] addr = {wr_addr, rd_req_addr};
    reg [N-1:0] open_ok;  // not stalled at random this cycle
    always @* begin
        for (i = 0; i < N; i = i + 1)
            open_ok[i] = lfsr[16*i +: 8] >= (i < NR ? rd_stall : wr_stall);
    end

    // the bandwidth arbiter: which channels move a word this cycle
    reg [31:0] credit, avail, cost, cap;
    localparam CW = $clog2(N + 1);
    reg [CW-1:0] turn, next_turn;
    reg burst_open, next_open;
    reg [CW-1:0] burst_chan, next_chan;
    reg [AW-1:0] burst_block, next_block, block;
    reg [N-1:0] grant;
    reg blocked;
    always @* begin
        rd_req_ready = 0;
        wr_ready = 0;
        c = 0;
        block = 0;
        cost = 0;
        grant = 0;
        avail = credit + {15'd0, bandwidth};
        cap = MW + burst_cycles * bandwidth;
        next_turn = turn;
        next_open = burst_open;
        next_chan = burst_chan;
        next_block = burst_block;
        blocked = 0;
        if (bandwidth == 0) begin
            grant = open_ok;
        end else begin
            for (j = 0; j < N; j = j + 1) begin
                c = (32'(turn) + j) % N;
                block = addr[AW*c +: AW] >> burst_shift;
                if (!blocked && req[c] && open_ok[c]) begin
                    cost = MW;
                    if (burst_cycles != 0 && !(next_open && 32'(next_chan) == c
                                               && next_block == block))
                        cost = cost + burst_cycles * bandwidth;
                    if (avail >= cost) begin
                        grant[c] = 1;
                        avail = avail - cost;
                        next_open = 1;
                        next_chan = CW'(c);
                        next_block = block;
                        // the turn stays while the channel's next word is in its burst
                        if (burst_cycles != 0
                                && ((addr[AW*c +: AW] + 1) >> burst_shift) == block)
                            next_turn = CW'(c);
                        else
                            next_turn = CW'((c + 1) % N);
                    end else
                        blocked = 1;
                end
            end
        end
        rd_req_ready = grant[NR-1:0];
        wr_ready = grant[N-1:NR];
    end

    // the read delay line: slot `now` leaves this cycle, a word taken now lands in the
    // slot `latency` - 1 cycles on
    localparam LW = $clog2(LMAX);
    reg [MW-1:0] ring_data [0:NR*LMAX-1];
    reg [NR*LMAX-1:0] ring_valid;
    reg [LW-1:0] now;
    wire [LW-1:0] delay = latency > 1 ? LW'(latency - 1) : 0;
    wire [LW-1:0] land = now + delay;

    always @(posedge clk) begin
        for (i = 0; i < N; i = i + 1) begin
            if (rst)
                lfsr[16*i +: 16] <= 16'(SEED ^ 16'(16'h1F35 * (i + 1))) | 16'h0001;
            else  // x^16 + x^14 + x^13 + x^11 + 1
                lfsr[16*i +: 16] <= {lfsr[16*i +: 15],
                                     lfsr[16*i+15] ^ lfsr[16*i+13] ^ lfsr[16*i+12] ^ lfsr[16*i+10]};
        end
        if (rst) begin
            words_read <= 0;
            words_written <= 0;
            words_distinct <= 0;
            credit <= 0;
            turn <= 0;
            burst_open <= 0;
            burst_chan <= 0;
            burst_block <= 0;
            now <= 0;
            ring_valid <= 0;
        end else begin
            credit <= bandwidth == 0 ? 0 : (avail > cap ? cap : avail);
            turn <= next_turn;
            burst_open <= next_open;
            burst_chan <= next_chan;
            burst_block <= next_block;
            now <= now + 1;
            words_read <= words_read + 48'($countones(rd_req_valid & rd_req_ready));
            words_written <= words_written + 48'($countones(wr_valid & wr_ready));
        end
        if (rst || forget)
            tag <= tag + 1;
        else
            for (i = 0; i < NR; i = i + 1)
                if (fresh[i])
                    seen[rd_req_addr[AW*i +: AW]] <= tag;
        if (!rst && !forget)
            words_distinct <= words_distinct + 48'($countones(fresh));
        for (i = 0; i < NR; i = i + 1) begin
            if (delay == 0) begin
                rd_resp_valid[i] <= !rst && rd_req_valid[i] && rd_req_ready[i];
                rd_resp_data[MW*i +: MW] <= mem[rd_req_addr[AW*i +: AW]];
            end else begin
                rd_resp_valid[i] <= !rst && ring_valid[LMAX*i + 32'(now)];
                rd_resp_data[MW*i +: MW] <= ring_data[LMAX*i + 32'(now)];
                if (!rst) begin
                    ring_valid[LMAX*i + 32'(now)] <= 0;
                    if (rd_req_valid[i] && rd_req_ready[i]) begin
                        ring_valid[LMAX*i + 32'(land)] <= 1;
                        ring_data[LMAX*i + 32'(land)] <= mem[rd_req_addr[AW*i +: AW]];
                    end
                end
            end
        end
        for (i = 0; i < NW; i = i + 1)
            if (!rst && wr_valid[i] && wr_ready[i])
                mem[wr_addr[AW*i +: AW]] <= wr_data[MW*i +: MW];
        if (load)
            $readmemh(load_path, mem);
        if (dump)
            $writememh(dump_path, mem, dump_first, dump_last);
    end
endmodule

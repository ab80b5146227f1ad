// Simulation model of the chip's memory (mixgcn.hdl.memport): NR read channels and NW
// write channels, each moving one MW-bit word a cycle. A read returns its word one cycle
// after the request is taken; responses are never stalled. Python loads and reads the
// array `mem` in bulk through the simulator; nothing here waits on Python.
//
// Random stalls: with `rd_stall` = s, each read channel refuses a request in a cycle
// with probability s/256; with `wr_stall` = s, each write channel refuses a write. Each
// channel draws from its own 16-bit LFSR seeded from SEED, so testbenches get seeded
// random stalls on the chip's inputs and backpressure on its outputs, independently,
// at full simulation speed.
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
    parameter SEED = 16'hACE1
) (
    input                   clk,
    input                   rst,
    input      [7:0]        rd_stall,
    input      [7:0]        wr_stall,
    input      [NR-1:0]     rd_req_valid,
    output     [NR-1:0]     rd_req_ready,
    input      [NR*AW-1:0]  rd_req_addr,
    output reg [NR-1:0]     rd_resp_valid,
    output reg [NR*MW-1:0]  rd_resp_data,
    input      [NW-1:0]     wr_valid,
    output     [NW-1:0]     wr_ready,
    input      [NW*AW-1:0]  wr_addr,
    input      [NW*MW-1:0]  wr_data,
    input                   load,
    input                   dump,
    input      [AW-1:0]     dump_first,
    input      [AW-1:0]     dump_last
);
    reg [MW-1:0] mem [0:(1<<AW)-1];
    string load_path, dump_path;
    initial begin
        if (!$value$plusargs("MIXGCN_MEM_LOAD=%s", load_path))
            load_path = "mixgcn_mem_load.hex";
        if (!$value$plusargs("MIXGCN_MEM_DUMP=%s", dump_path))
            dump_path = "mixgcn_mem_dump.hex";
    end
    reg [16*(NR+NW)-1:0] lfsr;
    integer i;

    genvar g;
    generate
        for (g = 0; g < NR; g = g + 1) begin : rd
            assign rd_req_ready[g] = lfsr[16*g +: 8] >= rd_stall;
        end
        for (g = 0; g < NW; g = g + 1) begin : wr
            assign wr_ready[g] = lfsr[16*(NR+g) +: 8] >= wr_stall;
        end
    endgenerate

    always @(posedge clk) begin
        for (i = 0; i < NR + NW; i = i + 1) begin
            if (rst)
                lfsr[16*i +: 16] <= 16'(SEED ^ 16'(16'h1F35 * (i + 1))) | 16'h0001;
            else  // x^16 + x^14 + x^13 + x^11 + 1
                lfsr[16*i +: 16] <= {lfsr[16*i +: 15],
                                     lfsr[16*i+15] ^ lfsr[16*i+13] ^ lfsr[16*i+12] ^ lfsr[16*i+10]};
        end
        for (i = 0; i < NR; i = i + 1) begin
            rd_resp_valid[i] <= !rst && rd_req_valid[i] && rd_req_ready[i];
            rd_resp_data[MW*i +: MW] <= mem[rd_req_addr[AW*i +: AW]];
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

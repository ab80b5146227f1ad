// A model of the Lattice ECP5 MULT18X18D multiplier block, in the modes mixgcn's
// generator instantiates (hdl/mac.py), for its formal proofs: not Lattice's model.
//
// From Lattice's ECP5 sysDSP usage guide: two 18-bit operands A and B, each signed
// when SIGNEDA / SIGNEDB is high; an optional register on each operand
// (REG_INPUTA_CLK, REG_INPUTB_CLK), on the product inside the block
// (REG_PIPELINE_CLK) and on the output P (REG_OUTPUT_CLK): "NONE" bypasses it,
// "CLK0" clocks it by CLK0, enabled by CE0 and reset to zero by RST0 synchronously
// (RESETMODE "SYNC"). What mixgcn does not use is not modelled, and refused: the other
// clocks, enables and resets, asynchronous reset; not modelled at all: the C input
// and the cascade (SOURCEA, SOURCEB: the generator ties them low).
module MULT18X18D(A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0, B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0, P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0, SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_PIPELINE_CE = "CE0";
    parameter REG_PIPELINE_RST = "RST0";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter RESETMODE = "SYNC";
    parameter GSR = "ENABLED";
    input A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0;
    input B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0;
    output P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0;
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB, CLK0, CE0, RST0;

    // the modes this model does not cover are refused when it is read
    generate
        if ((REG_INPUTA_CLK != "NONE" && REG_INPUTA_CLK != "CLK0")
            || (REG_INPUTB_CLK != "NONE" && REG_INPUTB_CLK != "CLK0")
            || (REG_PIPELINE_CLK != "NONE" && REG_PIPELINE_CLK != "CLK0")
            || (REG_OUTPUT_CLK != "NONE" && REG_OUTPUT_CLK != "CLK0")
            || REG_INPUTA_CE != "CE0" || REG_INPUTB_CE != "CE0"
            || REG_PIPELINE_CE != "CE0" || REG_OUTPUT_CE != "CE0"
            || REG_INPUTA_RST != "RST0" || REG_INPUTB_RST != "RST0"
            || REG_PIPELINE_RST != "RST0" || REG_OUTPUT_RST != "RST0"
            || RESETMODE != "SYNC")
            unsupported_MULT18X18D_mode not_modelled();
    endgenerate

    wire [17:0] a_in = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b_in = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    reg [17:0] a_reg, b_reg;
    reg [35:0] p_pipe, p_out;
    always @(posedge CLK0) begin
        if (RST0) begin
            a_reg <= 0; b_reg <= 0;
        end else if (CE0) begin
            a_reg <= a_in; b_reg <= b_in;
        end
    end
    wire [17:0] a = REG_INPUTA_CLK == "CLK0" ? a_reg : a_in;
    wire [17:0] b = REG_INPUTB_CLK == "CLK0" ? b_reg : b_in;
    // the operands extended by a sign bit (or a zero, unsigned): the product of two
    // 19-bit signed numbers, of which the 36 bits of P hold every value
    wire signed [18:0] a_ext = {SIGNEDA & a[17], a};
    wire signed [18:0] b_ext = {SIGNEDB & b[17], b};
    wire signed [37:0] product = a_ext * b_ext;
    always @(posedge CLK0) begin
        if (RST0) begin
            p_pipe <= 0;
        end else if (CE0) begin
            p_pipe <= product[35:0];
        end
    end
    wire [35:0] p_mid = REG_PIPELINE_CLK == "CLK0" ? p_pipe : product[35:0];
    always @(posedge CLK0) begin
        if (RST0) begin
            p_out <= 0;
        end else if (CE0) begin
            p_out <= p_mid;
        end
    end
    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = REG_OUTPUT_CLK == "CLK0" ? p_out : p_mid;
endmodule

"""The host link's serial port (``hdl/uart.py``): the generated Verilog under cocotb
against cocotbext-uart's model, and the divisor's checks."""

from __future__ import annotations

import pytest

from mixgcn.hdl.uart import UARTReceiver, UARTTransmitter, divisor_for
from mixgcn.sim.build import run_cocotb


# 16 cycles a bit, and 13 (odd: the start bit's middle is not a whole half)
@pytest.mark.sim
@pytest.mark.parametrize("divisor", [16, 13])
def test_uart_cocotb(divisor):
    from mixgcn.sim.verify import tb_uart

    run_cocotb(tb_uart.verilog(divisor), tb_uart.TOP, "mixgcn.sim.verify.tb_uart",
               extra_env={"MIXGCN_UART_DIVISOR": str(divisor)})


def test_divisor_for_the_boards_rates():
    assert divisor_for(100e6, 1_000_000) == 100
    assert divisor_for(100e6, 3_000_000) == 33  # 3.03 Mbaud: 1 % fast
    assert divisor_for(12e6, 115_200) == 104  # 115,385 baud: 0.16 % fast


@pytest.mark.parametrize(("clock", "baud", "message"), [
    (100e6, 0, r"must be positive"),
    (100e6, 40e6, r"cannot make 40,000,000 baud .* 2 cycles a bit; at least 4 cycles"),
    (10e6, 1.8e6, r"10 MHz clock cannot make 1,800,000 baud \(the nearest is 1,666,667, 6"),
])
def test_rates_the_clock_cannot_make_are_refused(clock, baud, message):
    with pytest.raises(ValueError, match=message):
        divisor_for(clock, baud)


@pytest.mark.parametrize("divisor", [3, 1 << 25, 16.0, True])
def test_bad_divisors_are_refused(divisor):
    for cls in (UARTReceiver, UARTTransmitter):
        with pytest.raises(ValueError, match=f"UART divisor must be an integer .* got {divisor!r}"):
            cls(divisor)


@pytest.mark.sim
@pytest.mark.parametrize("bench", ["tb_uart", "tb_frames"])
def test_link_verilog_lints_clean(bench, tmp_path):
    import importlib

    from mixgcn.gen.verilog import LINT_WAIVERS, lint

    tb = importlib.import_module(f"mixgcn.sim.verify.{bench}")
    path = tmp_path / "link.v"
    path.write_text(tb.verilog(13) if bench == "tb_uart" else tb.verilog())
    r = lint(path, tb.TOP, LINT_WAIVERS)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.sim
def test_frames_cocotb():
    from mixgcn.sim.verify import tb_frames

    run_cocotb(tb_frames.verilog(), tb_frames.TOP, "mixgcn.sim.verify.tb_frames")

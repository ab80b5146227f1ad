"""The chip's memory port on a DRAM behind LiteDRAM's controller (the ``dram`` extra):
the bridge under random traffic against LiteDRAM's model of the part, with the part's
timings checked; a chip training on it bit for bit like golden, alone and on the
simulated board top behind its host link; bad requests refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mixgcn.gen.config import CHIP_PRESETS
from mixgcn.gen.dram import DRAM_PARTS, DRAMError, dram_verilog
from mixgcn.sim.build import run_cocotb
from mixgcn.sim.chip.harness import harness_verilog

pytest.importorskip("litedram", reason="the dram extra is not installed")


@pytest.mark.sim
def test_bridge_on_litedram_random_traffic(capfd):
    from mixgcn.sim.verify import tb_dram

    run_cocotb(tb_dram.verilog(), tb_dram.TOP, "mixgcn.sim.verify.tb_dram")
    out = capfd.readouterr()
    # LiteDRAM's timing checker prints a line for every command that breaks the part's
    # datasheet timings
    assert "violation" not in (out.out + out.err).lower()


def test_dram_requests_refused_naming_the_value():
    with pytest.raises(DRAMError, match="unknown DRAM 'ddr9'"):
        dram_verilog("ddr9", 64)
    with pytest.raises(DRAMError, match="a 24-bit memory word is not a whole number"):
        dram_verilog("ulx3s-litedram", 24)
    with pytest.raises(DRAMError, match="10..200 MHz, got 5 MHz"):
        dram_verilog("ulx3s-litedram", 64, clk_hz=5e6)
    # the simulated chip runs at 100 MHz: a DRAM clocked faster would overrun the read
    # crossing (LiteDRAM's controller does not wait for read data to be taken)
    fast = dataclasses.replace(DRAM_PARTS["ulx3s-litedram"], clock_mhz=120.0)
    with pytest.raises(DRAMError, match=r"chip's clock \(100 MHz\) is slower than the "
                                        r"DRAM's \(120 MHz\)"):
        harness_verilog(CHIP_PRESETS["tiny"], dram=fast)


@pytest.mark.sim
@pytest.mark.slow  # the board top trains over its link on LiteDRAM in make test
def test_chip_trains_on_litedram_exactly(tmp_path):
    """The tiny chip on LiteDRAM's model of the ULX3S's SDRAM: every operand reaches it
    through the controller (written there by the harness's copier) and every result
    leaves through it; the weights are golden fixed16's, the memory's words the same
    as on the ideal memory, the cycles more."""
    import json

    from mixgcn.host.cli import main

    runs = {}
    for memory in ("ideal", "ulx3s-litedram"):
        out = tmp_path / f"{memory}.json"
        assert main(["train", "--backend", "rtl", "--chip", "tiny", "--memory", memory,
                     "--dataset", "synthetic:nodes=120,features=24", "--epochs", "1",
                     "--quiet", "--json", str(out)]) == 0
        runs[memory] = json.loads(out.read_text())
    golden = tmp_path / "golden.json"
    assert main(["train", "--backend", "golden", "--precision", "fixed16", "--dataset",
                 "synthetic:nodes=120,features=24", "--epochs", "1", "--quiet",
                 "--json", str(golden)]) == 0
    sha = json.loads(golden.read_text())["weights_sha256"]
    ideal, dram = runs["ideal"], runs["ulx3s-litedram"]
    assert dram["weights_sha256"] == ideal["weights_sha256"] == sha
    assert dram["memory_profile"] == "ulx3s-litedram"
    assert (dram["chip_words_read"], dram["chip_words_written"]) == \
        (ideal["chip_words_read"], ideal["chip_words_written"])
    assert "chip_words_read_distinct" not in dram  # a DRAM does not count them
    assert dram["cycles"] > ideal["cycles"]


@pytest.mark.sim
def test_board_trains_over_its_link_on_litedram_exactly(tmp_path):
    """The board top in simulation — UART, frames, request executor, chip — with its
    memory bus on LiteDRAM's controller and model of the ULX3S's SDRAM: every word the
    host writes or reads crosses the serial line and the controller; the weights are
    golden fixed16's."""
    import json

    from mixgcn.host.cli import main

    args = ["--dataset", "synthetic:nodes=120,features=24", "--epochs", "1", "--quiet"]
    out, golden = tmp_path / "board.json", tmp_path / "golden.json"
    assert main(["train", "--backend", "board", "--port", "sim", "--baud", "25000000",
                 "--chip", "tiny", "--memory", "ulx3s-litedram", "--json", str(out),
                 *args]) == 0
    assert main(["train", "--backend", "golden", "--precision", "fixed16", "--json",
                 str(golden), *args]) == 0
    board = json.loads(out.read_text())
    assert board["weights_sha256"] == json.loads(golden.read_text())["weights_sha256"]
    assert board["backend"] == "board" and board["memory_profile"] == "ulx3s-litedram"
    assert board["cycles"] > 0


@pytest.mark.sim
def test_board_on_litedram_refuses_memory_stalls_and_words_past_the_dram():
    """Random stalls are the memory model's; the host may use the words the DRAM holds
    (here all of the chip's address space: the ULX3S's 32 MB hold more)."""
    from mixgcn.host.board import BoardDevice
    from mixgcn.host.device import DeviceError
    from mixgcn.sim.board.process import SimulatedSerialPort

    chip, dram = CHIP_PRESETS["tiny"], DRAM_PARTS["ulx3s-litedram"]
    with SimulatedSerialPort(chip, divisor=4, memory=dram) as port:
        with pytest.raises(DeviceError, match="random memory stalls are the memory model's"):
            port.stalls(read=10)
        assert port.stretch > 1
        dev = BoardDevice(chip, port, clock_hz=100e6, timeout=0.05, capacity=1000,
                          stretch=port.stretch)
        words = np.arange(3 * dev.layouts.mem_bytes, dtype=np.uint8).reshape(3, -1)
        dev.write(997, words)
        assert np.array_equal(dev.read(997, 3), words)
        with pytest.raises(ValueError, match=r"memory words 998..1000 lie outside the "
                                             r"board's 1000-word memory"):
            dev.write(998, words)
    with pytest.raises(ValueError, match="the board's memory must hold 1..\\d+ words"):
        BoardDevice(chip, port, capacity=0)


def test_dram_refused_where_it_is_not_simulated():
    from mixgcn.host.cli import main

    with pytest.raises(SystemExit, match="--memory ulx3s-litedram: a DRAM behind its "
                                         "controller is simulated for one chip"):
        main(["train", "--backend", "rtl", "--chips", "2", "--exchange", "fabric",
              "--chip", "tiny", "--memory", "ulx3s-litedram",
              "--dataset", "synthetic:nodes=120,features=24", "--epochs", "1"])
    with pytest.raises(SystemExit, match="--memory ulx3s-litedram plays a memory in "
                                         "simulation; a real board has its own"):
        main(["train", "--backend", "board", "--port", "/dev/null", "--chip", "tiny",
              "--memory", "ulx3s-litedram", "--dataset", "synthetic:nodes=120,features=24",
              "--epochs", "1"])

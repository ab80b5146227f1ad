"""The chip's memory port on a DRAM behind LiteDRAM's controller (the ``dram`` extra):
the bridge under random traffic against LiteDRAM's model of the part, with the part's
timings checked; a chip training on it bit for bit like golden; bad requests refused."""

from __future__ import annotations

import pytest

from mixgcn.gen.dram import DRAMError, dram_verilog
from mixgcn.sim.build import run_cocotb

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


@pytest.mark.sim
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


def test_dram_refused_where_it_is_not_simulated():
    from mixgcn.host.cli import main

    with pytest.raises(SystemExit, match="--memory ulx3s-litedram: a DRAM behind its "
                                         "controller is simulated for one chip of "
                                         "--backend rtl"):
        main(["train", "--backend", "board", "--chip", "tiny", "--memory", "ulx3s-litedram",
              "--dataset", "synthetic:nodes=120,features=24", "--epochs", "1"])

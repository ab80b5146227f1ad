"""The chip's generated Verilog under cocotb (Verilator) on the memory model: kernels
and the fused pipeline bit for bit against the golden backend, memory stalls,
descriptor corner cases, reset mid-batch; plus lint and configuration checks."""

from __future__ import annotations

import pytest

from mixgcn.gen.config import CHIP_PRESETS, ChipConfig, ConfigError, DCEConfig, SAEConfig
from mixgcn.gen.verilog import LINT_WAIVERS, chip_verilog, lint
from mixgcn.sim.build import run_cocotb
from mixgcn.sim.chip.harness import MEMORY_MODEL, TOP, harness_verilog
from mixgcn.sim.verify.tb_chip import LOOPBACK, SIM_CONFIGS

# each configuration's testbench seed and the seed of its harness's stall generators
SEEDS = {"tiny": (11, 0xACE1), "shallow": (23, 0x1D2C), "ported": (37, 0x7B05)}


@pytest.mark.sim
@pytest.mark.parametrize("name", list(SIM_CONFIGS))
def test_chip_cocotb(name):
    seed, harness_seed = SEEDS[name]
    run_cocotb(harness_verilog(SIM_CONFIGS[name], loopback=LOOPBACK[name], seed=harness_seed),
               TOP, "mixgcn.sim.verify.tb_chip",
               extra_env={"MIXGCN_CHIP": name, "MIXGCN_SEED": str(seed)}, lean=True,
               timing=True)


@pytest.mark.sim
def test_chip_verilog_lints_clean(tmp_path):
    path = tmp_path / "chip.v"
    path.write_text(chip_verilog(CHIP_PRESETS["tiny"]))
    r = lint(path, "chip", LINT_WAIVERS)
    assert r.returncode == 0, r.stderr[-3000:]


def test_chip_and_system_verilog_have_every_port():
    """The top modules `make verilog` writes: every port of the component, payloads
    (views of signals) included — a missing input would be a constant, and synthesis
    would remove the logic behind it."""
    import re

    from mixgcn.gen.config import FABRIC_PRESETS, SystemConfig
    from mixgcn.gen.verilog import system_verilog

    def header(text, top):
        return re.search(rf"module {top}\((.*?)\);", text, re.S).group(1)

    chip = header(chip_verilog(CHIP_PRESETS["tiny"]), "chip")
    for port in ("desc__payload", "desc__valid", "status__payload",
                 "memory__csr__resp__payload", "memory__sae__wr__payload", "clk", "rst"):
        assert re.search(rf"\b{port}\b", chip), port
    system = header(system_verilog(SystemConfig(chip=CHIP_PRESETS["tiny"], chips=2,
                                                fabric=FABRIC_PRESETS["serial"])), "system")
    for port in ("chips__0__desc__payload", "chips__1__status__payload", "route"):
        assert re.search(rf"\b{port}\b", system), port


@pytest.mark.sim
def test_memory_model_lints_clean():
    r = lint(MEMORY_MODEL, "mixgcn_memory")  # hand-written: no waivers
    assert r.returncode == 0, r.stderr[-3000:]


def test_chip_config_refuses_mismatched_engines():
    with pytest.raises(ConfigError, match=r"SAE lanes \(4\), DCE rows \(4\) and DCE cols \(8\)"):
        ChipConfig(sae=SAEConfig(lanes=4), dce=DCEConfig(rows=4, cols=8))
    with pytest.raises(ConfigError, match="SAE width=16 differs from DCE width=12"):
        ChipConfig(sae=SAEConfig(lanes=4), dce=DCEConfig(rows=4, cols=4, width=12))
    with pytest.raises(ConfigError, match="pipeline_depth must be in 1..65536, got 0"):
        ChipConfig(pipeline_depth=0)
    with pytest.raises(ConfigError, match="must be an SAEConfig"):
        ChipConfig(sae="default")


@pytest.mark.sim
def test_memory_model_cocotb():
    from mixgcn.sim.verify import tb_memory

    run_cocotb(tb_memory.VERILOG, tb_memory.TOP, "mixgcn.sim.verify.tb_memory")


def test_memory_profiles_refuse_bad_values_naming_them():
    from mixgcn.gen.config import MEMORY_PROFILES, MemoryProfile, load_memory

    for kwargs, message in ((dict(latency=0), "latency must be in 1..64, got 0"),
                            (dict(latency=65), "latency must be in 1..64, got 65"),
                            (dict(bandwidth=-1), "bandwidth must be in 0..65536, got -1"),
                            (dict(bandwidth=16, burst=1000, burst_cycles=2),
                             "burst must be a power of two .* got 1000"),
                            (dict(burst=64, burst_cycles=2), "unlimited memory .* has no bursts"),
                            (dict(bandwidth=16, burst=64), "both 0 or both set"),
                            (dict(name=""), "name must be a non-empty string")):
        with pytest.raises(ConfigError, match=message):
            MemoryProfile(**kwargs)
    with pytest.raises(ConfigError, match="unknown memory 'dram': expected one of "
                                          "ideal, ulx3s-sdram, .*ulx3s-litedram"):
        load_memory("dram")
    for profile in MEMORY_PROFILES.values():  # each survives its JSON (the server's copy)
        assert MemoryProfile.from_dict(profile.to_dict()) == profile
    with pytest.raises(ConfigError, match="unknown key.* 'speed'"):
        MemoryProfile.from_dict({"speed": 3})
    # the budget stretch: 1 on the ideal memory; a 64-bit word at 16 bits a cycle
    # with 4-cycle bursts takes 8 cycles, 8 channels of them, plus latency 10 + 2
    assert MEMORY_PROFILES["ideal"].stretch(64, 8) == 1
    assert MEMORY_PROFILES["ulx3s-sdram"].stretch(64, 8) == 8 * (4 + 4) + 12

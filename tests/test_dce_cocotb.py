"""The DCE's generated Verilog under cocotb (Verilator, and Icarus when installed),
bit for bit against the golden operators; plus lint and configuration checks."""

from __future__ import annotations

import pytest

from mixgcn.gen.config import DCE_PRESETS, ConfigError, DCEConfig
from mixgcn.gen.verilog import LINT_WAIVERS, dce_verilog, lint
from mixgcn.sim.build import config_env, run_cocotb
from mixgcn.sim.toolchain import available_simulators

# Output FIFO depths 1, 3 (not a power of two), 4 (a power of two) and 5 (one above),
# on arrays wide, tall and square.
SIM_CONFIGS = {
    "tiny": DCE_PRESETS["tiny"],
    "fifo1": DCEConfig(rows=3, cols=2, max_k=64, max_rows=512, out_fifo_depth=1),
    "fifo3": DCEConfig(rows=4, cols=4, max_k=128, max_rows=512, out_fifo_depth=3),
    "fifo5": DCEConfig(rows=1, cols=5, max_k=32, max_rows=512, out_fifo_depth=5),
}


SEEDS = {"tiny": 4, "fifo1": 1, "fifo3": 2, "fifo5": 3}  # each configuration's seed


@pytest.mark.sim
@pytest.mark.parametrize("simulator", available_simulators())
@pytest.mark.parametrize("name", list(SIM_CONFIGS))
def test_dce_cocotb(name, simulator):
    cfg = SIM_CONFIGS[name]
    env = config_env("MIXGCN_DCE_CONFIG", cfg)
    env["MIXGCN_SEED"] = str(SEEDS[name])
    run_cocotb(dce_verilog(cfg), "dce", "mixgcn.sim.verify.tb_dce", simulator=simulator,
               extra_env=env)


@pytest.mark.sim
# the default preset's lint (the largest) with the slow tier; the others stay quick
@pytest.mark.parametrize("preset", [pytest.param(p, marks=pytest.mark.slow) if p == "default" else p
                                    for p in DCE_PRESETS])
def test_dce_verilog_lints_clean(preset, tmp_path):
    path = tmp_path / "dce.v"
    path.write_text(dce_verilog(DCE_PRESETS[preset]))
    r = lint(path, "dce", LINT_WAIVERS)
    assert r.returncode == 0, r.stderr[-3000:]


def test_dce_verilog_is_deterministic():
    cfg = DCE_PRESETS["tiny"]
    assert dce_verilog(cfg) == dce_verilog(cfg)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(rows=0), "DCEConfig.rows must be in 1..256, got 0"),
    (dict(cols=300), "DCEConfig.cols must be in 1..256, got 300"),
    (dict(width=1), "DCEConfig.width must be in 2..32, got 1"),
    (dict(rows=2.5), "DCEConfig.rows must be an integer, got 2.5"),
    (dict(acc_width=40), r"acc_width=40 can overflow: a reduction of 65536 .* needs 48 bits"),
    (dict(acc_width=20), "DCEConfig.acc_width must be in 32..128, got 20"),
    (dict(out_fifo_depth=0), "DCEConfig.out_fifo_depth must be in 1..4096, got 0"),
    (dict(max_k=0), "DCEConfig.max_k must be >= 1, got 0"),
    (dict(max_k=4, rows=8), "DCEConfig.max_k=4 is below rows=8"),
])
def test_bad_dce_configs_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        DCEConfig(**kwargs)


def test_engine_refuses_a_non_config():
    from mixgcn.hdl.dce import DenseCombinationEngine

    with pytest.raises(TypeError, match="expected a DCEConfig, got"):
        DenseCombinationEngine({"rows": 2})

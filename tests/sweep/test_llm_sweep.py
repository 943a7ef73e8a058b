"""The sweep's LLM workload: an ``llm`` table expands into one workload per combination of its listed values, each
row's metrics are the ones ``simulate_llm`` gives for that request alone, and bad keys or values are one-line spec
errors naming them."""

import re

import pytest

from isa.arch import load_arch
from npusim.app.llm import MODELS, simulate_llm
from npusim.app.sweep import METRICS, SpecError, load_spec, sweep
from npusim.app.sweep.llm_workload import LlmPoint

LLM_COLUMNS = ("llm", "prompt", "batch", "weights", "ttft_s", "tpot_s", "tokens_per_s", "decode_dram_bytes_per_token",
               "decode_bound_by")


def test_an_llm_table_expands_into_one_workload_per_combination_first_key_slowest():
    spec = load_spec({"workloads": [{"llm": "tiny-llama", "prompt": [8, 16], "batch": [1, 4], "weights": "i8"},
                                    {"llm": "tiny-gpt2", "name": "g"}]})
    got = [(w.name, w.prompt, w.batch, w.weights) for w in spec.workloads]
    assert got == [("tiny-llama prompt=8 batch=1", 8, 1, "i8"), ("tiny-llama prompt=8 batch=4", 8, 4, "i8"),
                   ("tiny-llama prompt=16 batch=1", 16, 1, "i8"), ("tiny-llama prompt=16 batch=4", 16, 4, "i8"),
                   ("g", 128, 1, "i4")]
    g = spec.workloads[-1]   # simulate_llm's defaults
    assert (g.model, g.generate, g.kv, g.samples) == ("tiny-gpt2", 32, "f32", 5)
    assert len({w.digest for w in spec.workloads}) == 5
    assert LlmPoint("other name", "tiny-gpt2").digest == g.digest   # the name is not part of the key
    assert LlmPoint("g", "tiny-gpt2", generate=31).digest != g.digest


@pytest.fixture(scope="module")
def table():
    spec = {"arch": "edge16", "grid": {"dram.gb_per_s": [6.4, 12.8]},
            "workloads": [{"llm": "tiny-gpt2", "prompt": [4, 8], "batch": [1, 2], "generate": 3, "weights": "f32"},
                          {"llm": "tiny-llama", "prompt": 4, "generate": 1, "name": "prefill only"},
                          {"gemm": [16, 16, 16]}]}
    return sweep(spec, scheduler="synchronous")


def test_llm_rows_are_the_request_simulated_alone(table):
    rows = table[table["llm"] == "tiny-gpt2"]
    assert len(rows) == 8 and rows["error"].isna().all()
    assert list(rows["prompt"]) == [4, 4, 8, 8] * 2 and list(rows["batch"]) == [1, 2] * 4
    for _, row in rows.iterrows():
        arch = load_arch("edge16", [f"dram.gb_per_s={row['dram.gb_per_s']}"])
        r = simulate_llm("tiny-gpt2", arch, prompt=int(row["prompt"]), generate=3, batch=int(row["batch"]),
                         weights="f32")
        p, d = r["prefill"], r["decode"]
        assert (row["ttft_s"], row["tpot_s"], row["tokens_per_s"]) == (r["ttft_s"], r["tpot_s"], r["tokens_per_s"])
        assert row["decode_dram_bytes_per_token"] == d["dram_bytes_per_token"]["total"]
        assert row["decode_bound_by"] == d["bound_by"] and row["weights"] == "f32"
        assert row["cycles"] == p["cycles"] + d["cycles"]                       # the whole request
        assert row["time_s"] == pytest.approx(row["cycles"] / (arch.clock.ghz * 1e9), rel=1e-12)
        assert abs(row["dram_bytes"] - p["dram_bytes"] - d["dram_bytes"]) <= 2   # (each rounded to a byte)
        assert row["energy_pj"] == pytest.approx(p["energy_pj"] + d["energy_pj"], rel=1e-12)
        assert row["energy_per_inference_pj"] == d["energy_per_token_pj"]
        assert row["power_w"] == pytest.approx(row["energy_pj"] * 1e-12 / row["time_s"], rel=1e-12)
        peak = arch.matrix.rows * arch.matrix.cols
        assert row["mac_utilization"] == pytest.approx((p["macs"] + d["macs"]) / (row["cycles"] * peak))
        assert row["host_ops"] == 0 and row["host_energy_pj"] == 0.0
    by = rows.set_index(["dram.gb_per_s", "prompt", "batch"])
    assert by.loc[(12.8, 8, 2), "tokens_per_s"] > by.loc[(12.8, 8, 1), "tokens_per_s"]   # a batch shares the weights
    assert by.loc[(12.8, 4, 1), "cycles"] < by.loc[(6.4, 4, 1), "cycles"]                # more bandwidth, sooner


def test_a_request_without_decode_steps_and_other_kinds_leave_the_llm_columns_empty(table):
    only = table[table["workload"] == "prefill only"]
    assert len(only) == 2 and (only["ttft_s"] > 0).all() and only[["tpot_s", "tokens_per_s"]].isna().all().all()
    assert list(only["time_s"]) == pytest.approx(list(only["ttft_s"]), rel=1e-12)
    assert list(only["energy_per_inference_pj"]) == list(only["energy_pj"])   # batch 1: the prefill's energy
    gemm = table[table["workload"].str.startswith("gemm")]
    assert len(gemm) == 2 and gemm[list(LLM_COLUMNS)].isna().all().all()
    assert set(LLM_COLUMNS) <= set(METRICS)


def test_the_llm_report_totals_add_up_and_interpolate_like_cycles():
    """The keys the sweep reads (macs, DRAM read and written, energy by kind) agree with the report's own totals,
    and the interpolated decode MACs equal those of simulating every step (they grow linearly with the context)."""
    arch = load_arch("mid32")
    every = simulate_llm("tiny-llama", arch, prompt=16, generate=10, samples=0)
    some = simulate_llm("tiny-llama", arch, prompt=16, generate=10, samples=3)
    for r in (every, some):
        for phase in (r["prefill"], r["decode"]):
            assert abs(phase["dram_bytes_read"] + phase["dram_bytes_written"] - phase["dram_bytes"]) <= 1
            assert sum(phase["energy_by_kind_pj"].values()) == pytest.approx(phase["energy_pj"], rel=1e-9)
    cfg = MODELS["tiny-llama"]
    q = cfg.heads * cfg.head_dim   # a query token's scores and context: 2 * q MACs per cached token and layer
    decode = sum(cfg.layers * (cfg.layer_params + 2 * q * (past + 1)) + cfg.hidden * cfg.vocab
                 for past in range(16, 16 + 9))
    assert some["decode"]["macs"] == every["decode"]["macs"] == decode
    assert every["prefill"]["macs"] == cfg.layers * (16 * cfg.layer_params + 2 * q * 16 * 16) + cfg.hidden * cfg.vocab


BAD = [
    ({"llm": "llama-9"}, "workloads[0].llm: unknown LLM config 'llama-9'; configs: llama-3.2-1b"),
    ({"llm": ["tiny-llama"]}, "workloads[0].llm: unknown LLM config ['tiny-llama']"),
    ({"llm": "tiny-llama", "promt": 8}, "workloads[0]: unknown key 'promt' for an llm workload; allowed: batch, "
                                        "generate, kv, llm, name, prompt, samples, weights"),
    ({"llm": "tiny-llama", "prompt": 0}, "workloads[0].prompt must be an integer >= 1 or a list of them, not 0"),
    ({"llm": "tiny-llama", "prompt": [8, "16"]}, "workloads[0].prompt must be an integer >= 1 or a list of them, "
                                                 "not '16'"),
    ({"llm": "tiny-llama", "batch": [1, 1]}, "workloads[0].batch must list distinct values, not [1, 1]"),
    ({"llm": "tiny-llama", "batch": []}, "workloads[0].batch must list distinct values, not []"),
    ({"llm": "tiny-llama", "batch": True}, "workloads[0].batch must be an integer >= 1 or a list of them, not True"),
    ({"llm": "tiny-llama", "weights": ["i4", "i3"]}, "workloads[0].weights must be one of f32, i8, i4, fp8 or a list "
                                                     "of them, not 'i3'"),
    ({"llm": "tiny-llama", "generate": [4, 8]}, "workloads[0].generate must be an integer >= 1, not [4, 8]"),
    ({"llm": "tiny-llama", "samples": -1}, "workloads[0].samples must be an integer >= 0, not -1"),
    ({"llm": "tiny-llama", "kv": "f16"}, "workloads[0].kv must be one of f32, not 'f16'"),
    ({"llm": "tiny-llama", "name": 3}, "workloads[0].name must be a string, not 3"),
    ({"llm": "gpt2", "prompt": [512, 1000], "generate": 100},
     "workloads[0]: gpt2 prompt=1000: prompt + generate = 1100 exceeds gpt2's 1024 positions"),
    ({"llm": "tiny-llama", "gemm": [1, 2, 3]}, "must have exactly one of zoo, onnx, gemm, conv, topology, llm, not "
                                               "gemm, llm"),
]


@pytest.mark.parametrize("entry, message", BAD, ids=[m for _, m in BAD])
def test_bad_llm_workloads_fail_with_one_line_naming_the_key(entry, message):
    with pytest.raises(SpecError, match=re.escape(message)) as e:
        load_spec({"workloads": [entry]})
    assert "\n" not in str(e.value)


def test_two_llm_tables_that_expand_to_the_same_name_must_be_named():
    with pytest.raises(SpecError, match=re.escape("two workloads are named 'tiny-llama batch=2'")):
        load_spec({"workloads": [{"llm": "tiny-llama", "batch": [1, 2]}, {"llm": "tiny-llama", "batch": [2, 4],
                                                                          "generate": 8}]})

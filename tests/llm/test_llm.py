"""LLM inference (npusim/app/llm): the decoder step graphs run on the NPU and equal onnxruntime, the KV cache is
appended in place, interpolated decode steps agree with simulating each step, and the report's figures follow from
the simulated pieces."""

import json

import pytest

from isa.arch import load_arch
from npusim.app.cli import main
from npusim.app.driver import run_model
from npusim.app.llm import MODELS, decoder_of, simulate_llm
from npusim.app.llm.decoder import head_model, layer_model
from npusim.app.llm.workload import LlmWorkload


def _check(model, arch: str) -> dict:
    _, _, _, report = run_model(model, load_arch(arch), validate=True, cache=False, fallback=False)
    bad = {k: v for k, v in report["validation"].items() if not v["ok"]}
    assert not bad and not report["host_ops"], bad
    return report


@pytest.mark.parametrize("arch", ["edge16", "mid32", "dc128"])
@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_prefill_and_decode_layers_match_onnxruntime(name, arch):
    cfg = MODELS[name]
    _check(layer_model(cfg, "f32", 2, 5, 0), arch)                  # prefill: causal mask, empty past
    report = _check(layer_model(cfg, "f32", 2, 1, 7), arch)         # decode over 7 cached tokens
    kv = 2 * cfg.kv_heads * cfg.head_dim * 4                        # one token's keys (or values), 2 sequences
    assert [c["appended_bytes"] for c in report["kv_cache"]] == [kv, kv]


@pytest.mark.parametrize("fmt", ["i8", "i4", "fp8"])
def test_quantized_weights_match_onnxruntime(fmt):
    cfg = MODELS["tiny-llama"]
    report = _check(layer_model(cfg, fmt, 1, 1, 6), "mid32")
    assert {r["op"] for r in report["layers"] if r["name"].endswith("_proj.matmul")} == {"QuantMatMul"}
    _check(head_model(cfg, fmt, 1), "edge16")


def test_interpolated_decode_agrees_with_every_step():
    every = simulate_llm("tiny-llama", load_arch("mid32"), prompt=16, generate=12, samples=0)
    some = simulate_llm("tiny-llama", load_arch("mid32"), prompt=16, generate=12, samples=3)
    assert every["decode"]["simulated_contexts"] == list(range(17, 28))
    assert some["decode"]["simulated_contexts"] == [17, 22, 27] and some["decode"]["interpolated"]
    assert some["prefill"] == every["prefill"]
    err = abs(some["decode"]["cycles"] - every["decode"]["cycles"]) / every["decode"]["cycles"]
    assert err < 0.01, err
    assert any("interpolated" in n for n in some["notes"]) and not any("interpolated" in n for n in every["notes"])


def test_a_decode_step_reads_the_cache_once_and_writes_one_token():
    """From one context to the next a step's DRAM bytes grow by about one token's keys and values read (plus the
    scores that token adds), not by the cache: the cache is appended in place."""
    cfg, arch = MODELS["tiny-llama"], load_arch("mid32")
    token = 2 * cfg.kv_heads * cfg.head_dim * 4                     # one token's K and V in one layer
    moved = {}
    for past in (40, 41, 80):
        _, result, _, report = run_model(layer_model(cfg, "f32", 1, 1, past), arch, timing_only=True, cache=False)
        moved[past] = result.dram_bytes_read + result.dram_bytes_written
        appends = [r for r in report["layers"] if r["op"] == "KVAppend"]
        assert [r["dram_bytes"] for r in appends] == [token, token]   # each new row read once and written once
    grow = moved[41] - moved[40]
    assert token <= grow < 2 * token, (grow, token)
    assert moved[80] - moved[40] < 40 * 2 * token   # the cache itself is never copied


def test_report_figures_follow_from_the_pieces():
    arch = load_arch("edge16")
    r = simulate_llm("tiny-gpt2", arch, prompt=8, generate=5, batch=2, weights="f32")
    hz = arch.clock.ghz * 1e9
    assert r["ttft_s"] == pytest.approx(r["prefill"]["cycles"] / hz, rel=1e-6)
    d = r["decode"]
    assert d["steps"] == 4 and r["tpot_s"] == pytest.approx(d["cycles"] / 4 / hz, rel=1e-6)
    assert r["tokens_per_s"] == pytest.approx(2 / r["tpot_s"]) and r["tokens_per_s_per_sequence"] == \
        pytest.approx(1 / r["tpot_s"])
    per = d["dram_bytes_per_token"]
    assert per["total"] == pytest.approx(d["dram_bytes"] / 4 / 2)
    assert per["kv_written"] == MODELS["tiny-gpt2"].kv_bytes_per_token(4)
    bus = arch.dram.gb_per_s / arch.clock.ghz                           # bytes per cycle
    assert d["dram_bound_cycles_per_token"] == pytest.approx(
        2 * (per["weights"] + per["kv_read"] + per["kv_written"]) / bus, rel=1e-9)


def test_workload_is_validated():
    with pytest.raises(ValueError, match="weights must be one of f32, i8, i4, fp8, not 'i3'"):
        decoder_of("tiny-llama", "i3")
    with pytest.raises(ValueError, match="exceeds gpt2's 1024 positions"):
        LlmWorkload(decoder_of("gpt2", "f32"), prompt=1000, generate=100)


def test_cli_llm_json_and_errors(capsys):
    assert main(["llm", "tiny-llama", "--arch", "edge16", "--prompt", "6", "--generate", "3", "--json", "-",
                 "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("ttft_s", "tpot_s", "tokens_per_s"):
        assert r[key] > 0
    for key in ("cycles", "dram_bytes", "energy_pj"):
        assert r["prefill"][key] > 0 and r["decode"][key] > 0
    assert r["decode"]["cycles_per_token"] > 0 and r["decode"]["dram_bytes_per_token"]["total"] > 0
    assert main(["llm", "llama-9", "--arch", "edge16"]) == 1
    assert "no LLM config 'llama-9'; configs: llama-3.2-1b" in capsys.readouterr().err


EXPORTED = "tests/data/gpt2_tiny_decode_step.onnx"   # tests/data/export_decoder_step.py wrote it (torch, no torch here)


@pytest.mark.parametrize("past", [0, 5])
def test_an_exported_decoder_step_runs_on_the_npu_with_its_cache_in_place(past):
    dims = {"batch_size": 2, "sequence_length": 3 if past == 0 else 1, "past_sequence_length": past,
            "total_sequence_length": past + (3 if past == 0 else 1)}
    _, _, _, report = run_model(EXPORTED, load_arch("mid32"), validate=True, cache=False, fallback=False, dims=dims)
    assert all(v["ok"] for v in report["validation"].values()) and not report["host_ops"]
    bound = sorted(c["present"] for c in report["kv_cache"])
    # a prefill's past is empty: its Concat is dropped to the new tokens alone, nothing to bind
    assert bound == ([] if past == 0 else [f"present.{i}.{kv}" for i in (0, 1) for kv in ("key", "value")])


def test_npusim_llm_drives_an_exported_decoder(capsys):
    assert main(["llm", EXPORTED, "--arch", "edge16", "--prompt", "8", "--generate", "4", "--json", "-",
                 "--quiet"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["model"] == "gpt2_tiny_decode_step" and r["weights"] == "as exported" and r["layers"] == 1
    assert r["decode"]["steps"] == 3 and r["decode"]["dram_bytes_per_token"]["kv_written"] == 2 * 2 * 2 * 16 * 4


def test_a_file_that_is_not_a_decoder_step_is_refused(tmp_path, capsys):
    from npusim.app.zoo import bert_layer

    path = tmp_path / "bert.onnx"
    path.write_bytes(bert_layer(seq=8, hidden=32, heads=2, ffn=64).SerializeToString())
    assert main(["llm", str(path), "--arch", "edge16"]) == 1
    assert "not a decoder step with a KV cache: it needs an 'input_ids' input" in capsys.readouterr().err

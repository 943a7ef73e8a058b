"""npusim.app.seedbench.convt: the ConvTranspose rows of bench/seed_ops.py on the small case C (validated against
onnxruntime), and the gains the issue asks for on it (split against both swelling baselines on mid32)."""

import pytest

from npusim.app.seedbench.convt import CASES, COLUMNS, conv_transpose_rows, gains, input_tensor_bytes


def test_case_c_rows_and_gains_on_mid32():
    rows = conv_transpose_rows(cases=("C",), presets=("mid32",))
    assert [r["variant"] for r in rows] == ["swell_dram", "swell_spm", "split"]
    for r in rows:
        assert tuple(r) == COLUMNS and r["validated"] == "tol", r
        assert r["useful_macs"] == CASES["C"].macs
    split = rows[-1]
    assert split["instr_macs"] < 1.1 * split["useful_macs"]                    # no tap multiplies an inserted zero
    assert rows[0]["dram_wr"] > split["dram_wr"]                                # the swelled input written to DRAM
    for g in gains(rows):
        # the windows re-read a halo row per tile: 400,896 B against the swelled conv's 1,597,440 B is -74.9%
        assert g["input_tensor"] <= -0.75 and g["input_bytes"] <= -0.7, g
        assert g["util"] >= 0.5 and g["speedup"] > 1, g


def test_input_tensor_bytes_of_cases_a_b_c():
    # split / swelled input bytes of A, B, C (docs/perception.md#convtranspose-cases), by hand: C*H*W*4 and
    # C*(s*(H-1) + 1 + (k-1-p_b) + (k-1-p_e+op))^2*4
    for case, (split, swelled) in {"A": (8_294_400, 33_547_264), "B": (5_120_000, 21_099_008),
                                   "C": (320_000, 1_384_448)}.items():
        assert input_tensor_bytes(CASES[case], "split") == split
        assert input_tensor_bytes(CASES[case], "swell_dram") == input_tensor_bytes(CASES[case], "swell_spm") == swelled
    with pytest.raises(ValueError, match="variant must be one of"):
        conv_transpose_rows(cases=("C",), presets=("mid32",), variants=("im2col",))

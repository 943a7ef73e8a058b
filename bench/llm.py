"""LLM decode on each preset: is decode DRAM-bound as it should be, and how fast does ``npusim llm`` run?

    python bench/llm.py [--model llama-3.2-1b] [--prompt 512] [--presets edge16 mid32 dc128]
                        [--weights f32 i8 i4 fp8] [--speed]

Table 1 runs ``simulate_llm`` (timing only) with a ``--prompt``-token prefill and one decode step over that context,
batch 1, for each preset and weight format: TTFT, TPOT (one decode step), tokens/s, DRAM bytes a token (weights, KV
read), the DRAM bound of a step (those bytes at ``dram.gb_per_s``), the run over the bound, and what the report says
binds. ``--speed`` then times the issue's two commands as a user runs them (wall seconds, fresh compiles:
``--no-cache``): llama-3.2-1b, 512-token prompt, 32 tokens at int4 on mid32; llama-3-8b, 128-token prompt, 4 tokens.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from isa.arch import load_arch
from npusim.app.llm import simulate_llm

SPEED = (["llama-3.2-1b", "--arch", "mid32", "--prompt", "512", "--generate", "32", "--weights", "i4"],
         ["llama-3-8b", "--arch", "mid32", "--prompt", "128", "--generate", "4", "--weights", "i4"])


def table(model: str, prompt: int, presets: list[str], weights: list[str]) -> None:
    print(f"{model}, prompt {prompt}, batch 1, one decode step over {prompt} cached tokens (timing only)")
    print(f"{'preset':7} {'weights':7} {'TTFT ms':>10} {'TPOT ms':>9} {'tok/s':>7} {'MB/token':>9} {'of it KV':>8} "
          f"{'bound ms':>9} {'run/bound':>9}  bound by   (wall s)")
    for preset in presets:
        for fmt in weights:
            t0 = time.perf_counter()
            r = simulate_llm(model, load_arch(preset), prompt=prompt, generate=2, weights=fmt, cache=False)
            d = r["decode"]
            b = d["dram_bytes_per_token"]
            hz = load_arch(preset).clock.ghz * 1e9
            print(f"{preset:7} {fmt:7} {r['ttft_s'] * 1e3:>10,.1f} {r['tpot_s'] * 1e3:>9,.2f} "
                  f"{r['tokens_per_s']:>7,.2f} {b['total'] / 1e6:>9,.1f} {b['kv_read'] / 1e6:>8,.1f} "
                  f"{d['dram_bound_cycles_per_token'] / hz * 1e3:>9,.2f} {d['bound_ratio']:>9.2f}  "
                  f"{d['bound_by']}   ({time.perf_counter() - t0:.0f})", flush=True)


def speed() -> None:
    print("\nnpusim llm ... --timing-only --no-cache --quiet, wall seconds on this machine")
    for argv in SPEED:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "npusim", "llm", *argv, "--timing-only", "--no-cache", "--quiet"],
                             capture_output=True, text=True, check=True).stdout
        tpot = next(line for line in out.splitlines() if line.startswith("decode:"))
        print(f"{' '.join(argv):80} {time.perf_counter() - t0:6.1f} s   {tpot}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.2-1b")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--presets", nargs="+", default=["edge16", "mid32", "dc128"])
    ap.add_argument("--weights", nargs="+", default=["f32", "i8", "i4", "fp8"])
    ap.add_argument("--speed", action="store_true", help="also time the two reference commands")
    args = ap.parse_args()
    table(args.model, args.prompt, args.presets, args.weights)
    if args.speed:
        speed()


if __name__ == "__main__":
    main()

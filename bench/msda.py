"""The multi-scale deformable attention rows of the perception bench (:mod:`npusim.app.seedbench.msda`;
docs/perception.md#deformable-attention-cases):
unfused vs fused (tables in the SPM or from DRAM) per preset, cycles, DRAM bytes, busy, SPM peak.

    .venv/bin/python bench/msda.py                 # the small cases with values
    .venv/bin/python bench/msda.py M2 M1 M3 --sweep  # the headline cases, timing-only, G = 1, 2, 4
"""

from isa.arch import presets_by_size
from npusim.app.seedbench.msda import CASES, SMALL, msda_rows


def main(argv: list[str] | None = None) -> None:
    """``python bench/msda.py [CASE ...] [--values] [--sweep]``: print the rows as a table (the small cases
    with values by default; ``--sweep`` adds ``vector.gather_rows`` 2 and 4)."""
    import argparse

    import pandas as pd
    from tqdm import tqdm

    ap = argparse.ArgumentParser(prog="python bench/msda.py", description=main.__doc__)
    ap.add_argument("cases", nargs="*", help=f"of {', '.join(c.name for c in CASES + SMALL)} (default: the small)")
    ap.add_argument("--values", action="store_true", help="simulate with values and check them")
    ap.add_argument("--sweep", action="store_true", help="G = vector.gather_rows 1, 2, 4")
    args = ap.parse_args(argv)
    by_name = {c.name: c for c in CASES + SMALL}
    unknown = [c for c in args.cases if c not in by_name]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(by_name)}")
    cases = [by_name[c] for c in args.cases] or list(SMALL)
    values = args.values or not args.cases
    g = (1, 2, 4) if args.sweep else (1,)
    with tqdm(total=len(cases) * len(presets_by_size()) * len(g) * 3, unit="run") as bar:
        rows = msda_rows(cases, variants=("unfused", "fused-spm", "fused-dram"), values=values, gather_rows=g,
                         progress=lambda r: bar.update())
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()

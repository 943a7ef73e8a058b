"""Fuzzing every input surface: Hypothesis strategies (cases.py) mutate valid seeds (fixtures.py), runner.py runs a
case under a time bound and classifies it, test_fuzz.py is the suite's CI profile, ``python -m tests.fuzz`` (make
fuzz) the long seeded run."""

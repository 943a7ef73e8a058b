"""Docs generated from code stay in sync with it."""

from npusim.app import docgen


def test_generated_tables_are_up_to_date():
    assert docgen.main(["--check"]) == 0, "run `python -m npusim.app.docgen` and commit the result"


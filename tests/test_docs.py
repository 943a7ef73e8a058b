"""Docs generated from code stay in sync with it."""

from npusim import docgen


def test_generated_tables_are_up_to_date():
    assert docgen.main(["--check"]) == 0, "run `python -m npusim.docgen` and commit the result"


def test_every_instruction_class_is_in_the_isa_doc():
    from isa.instructions import INSTRUCTION_CLASSES

    text = (docgen.ROOT / "docs/isa.md").read_text()
    for cls in INSTRUCTION_CLASSES:
        assert f"`{cls.__name__}`" in text

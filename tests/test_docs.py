"""Docs generated from code stay in sync with it; the docs' links resolve inside the repository, and no tracked file
sends a reader to a file outside it."""

import re
import subprocess
from pathlib import Path

import pytest

from npusim.app import docgen

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", "build", "dist"}
OUTSIDE = tuple(stem + ".md" for stem in ("seed" "-ops", "llm" "-multicore", "land" "scape", "isa" "-notes",
                                          "energy" "-sources", "style" "-by-example")) + ("shared" "/design",)
"""The names of the design notes that live outside the repository (and their folder), spelled in pieces so that this
file does not name them itself."""
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DOC_ANCHOR = re.compile(r"\b(docs/[\w.-]+\.md|README\.md)#([\w-]+)")


def tracked_files() -> list[Path]:
    """The files git tracks (every file under the checkout but caches and virtualenvs when there is no git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = [ROOT / f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if files:
        return [f for f in files if f.is_file()]
    return [p for p in ROOT.rglob("*") if p.is_file() and not SKIP_DIRS & set(p.relative_to(ROOT).parts)
            and not p.name.startswith(".venv")]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def markdown_pages() -> list[Path]:
    return sorted(f for f in tracked_files() if f.suffix == ".md")


def without_code(md: str) -> str:
    """Markdown with fenced code blocks and inline code spans blanked (links inside them are not links)."""
    md = re.sub(r"^```.*?^```", "", md, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "``", md)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (links and code marks removed) lower-cased, punctuation but hyphens and
    underscores dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page: its headings' slugs (``-1``, ``-2`` ... for repeats) and explicit ids."""
    md = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    seen: dict[str, int] = {}
    out = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", md))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", md, flags=re.M):
        s = slug(heading)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def test_generated_tables_are_up_to_date():
    assert docgen.main(["--check"]) == 0, "run `python -m npusim.app.docgen` and commit the result"


def test_finding5_no_tracked_file_cites_a_design_note_outside_the_repository():
    """Issue 24, finding 5: notebook 04 (and the code, tests and docs with it) cited a design note that is not in the
    repository; they cite docs/perception.md and the note's primary sources instead."""
    hits = [f"{f.relative_to(ROOT)}:{n}: {name}" for f in tracked_files() if (text := text_of(f)) is not None
            for n, line in enumerate(text.splitlines(), 1) for name in OUTSIDE if name in line]
    assert not hits, "references to files outside the repository:\n" + "\n".join(hits)


@pytest.mark.parametrize("page", markdown_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_inside_the_repository(page):
    """Every relative link (and image) of a tracked Markdown page names a tracked file or folder of the repository,
    and its ``#anchor``, if any, a heading of that page."""
    tracked = {f.relative_to(ROOT) for f in tracked_files()}
    folders = {p for f in tracked for p in f.parents}
    bad = []
    for target in LINK.findall(without_code(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):     # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        try:
            rel = dest.relative_to(ROOT)
        except ValueError:
            bad.append(f"{target}: outside the repository")
            continue
        if rel not in tracked and rel not in folders:
            bad.append(f"{target}: no such file in the repository")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {rel}")
    assert not bad, f"{page.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_doc_anchors_named_in_code_resolve():
    """Every ``docs/<page>.md#anchor`` a tracked file names (docstrings citing docs/perception.md's sections) is a
    heading of that page."""
    bad = []
    for f in tracked_files():
        text = text_of(f)
        for page, anchor in DOC_ANCHOR.findall(text or ""):
            target = ROOT / page
            if not target.is_file() or anchor not in anchors(target):
                bad.append(f"{f.relative_to(ROOT)}: {page}#{anchor}")
    assert not bad, "anchors that do not resolve:\n" + "\n".join(bad)

"""Issue 57 P2 and P3: Markdown and reStructuredText inline markup read as CommonMark and docutils read it, in
linear time: nothing a reader would read is dropped as a "link definition", and no line of brackets or
backquotes costs minutes. Time is measured in bench/bench_markup.py, never here: these assert what is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from typedrag.corpus.formats.markup import read_markup

FOOTNOTE = "The migration takes about ten minutes per gigabyte."
WARNING = "Never run the backup script as root because it deletes the staging folder."


def read(tmp_path: Path, text: str, syntax: str = "markdown") -> list[str]:
    path = tmp_path / ("doc.md" if syntax == "markdown" else "doc.rst")
    path.write_text(text, encoding="utf-8")
    return [block.text for block in read_markup(path, syntax).blocks]


def words(texts: list[str]) -> list[str]:
    return " ".join(texts).split()


# ---------------------------------------------------------------- P2: what is no link definition is text


def test_a_paragraph_or_a_footnote_that_opens_like_a_link_definition_is_kept(tmp_path):
    """Before, every block starting "[text]: " was dropped as a link definition: the warning, a numbered note
    and a GFM footnote never reached the index."""
    texts = read(
        tmp_path,
        f"# Notes\n\nMigrating is slow.[^1]\n\n[Warning]: {WARNING}\n\n[1]: See the appendix for the steps.\n\n"
        f"[^1]: {FOOTNOTE}\n\n[^2]: https://example.com/migration\n",
    )
    assert f"[Warning]: {WARNING}" in texts
    assert "[1]: See the appendix for the steps." in texts
    assert (
        f"[^1]: {FOOTNOTE}" in texts and "[^2]: https://example.com/migration" in texts
    )  # the footnote, with its label
    assert "Migrating is slow.[^1]" in texts  # the reference it is attached to, as written


def test_a_link_definition_as_commonmark_defines_it_is_no_text_and_its_links_read_as_their_text(tmp_path):
    texts = read(
        tmp_path,
        "# Streams\n\nUse [`fs.ReadStream`][rs] or [the guide][] or [Guide].\n\n"
        "[rs]: fs.md#class-fsreadstream\n[the guide]: <guide.md> \"The guide\"\n[guide]: guide.md 'Guide'\n",
    )
    assert texts == ["Use `fs.ReadStream` or the guide or Guide."]


def test_nested_brackets_and_escapes_read_as_commonmark_reads_them(tmp_path):
    texts = read(
        tmp_path,
        "# Links\n\nSee [the [first] part](a.md), \\[not a link\\] and ![a *diagram*](d.png) &amp; <https://x.org>.\n",
    )
    assert texts == ["See the [first] part, [not a link] and a *diagram* & https://x.org."]


def test_the_issues_reproduction_both_sentences_reach_the_index(tmp_path):
    from typedrag.index import build_index, open_retriever

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text(
        f"# Backups\n\nMigrating the archive is slow.[^1]\n\n[Warning]: {WARNING}\n\n[^1]: {FOOTNOTE}\n",
        encoding="utf-8",
    )
    build_index([tmp_path / "docs"], tmp_path / "idx", show_progress=False, retrieval="bm25")
    retriever = open_retriever(tmp_path / "idx")
    assert any(WARNING in hit.passage.text for hit in retriever.search("backup script as root", 5))
    assert any(FOOTNOTE in hit.passage.text for hit in retriever.search("minutes per gigabyte", 5))


def test_restructuredtext_links_roles_and_literals_read_as_their_text(tmp_path):
    texts = read(
        tmp_path,
        "Title\n=====\n\nSee `Python <https://python.org>`_, `<https://x.org>`_, :class:`tuple`, "
        ":ref:`the list <lists>` and ``len(x)``; `a < b`_ too.\n",
        "rst",
    )
    assert texts == ["See Python, https://x.org, tuple, the list and len(x); a < b too."]


# ---------------------------------------------------------------- P3: pathological inline markup, read correctly

LINK = "[word](https://example.com/x)"
IMAGE = "![alt](i.png)"
CODE = "`co de`"
# Markdown pieces and how CommonMark reads them, when pieces are separated by spaces: a bracket, an image
# opener or a bare "]" no link closes is text as written.
MD_PIECES = {
    "[": "[",
    "]": "]",
    "![": "![",
    "word": "word",
    LINK: "word",
    IMAGE: "alt",
    CODE: "`co de`",
    "(": "(",
    "[^1]": "[^1]",
}
RST_PIECES = {
    "`": "`",
    "<": "<",
    ">": ">",
    ":a:": ":a:",
    "word": "word",
    "`word <https://x.org>`_": "word",
    ":class:`word`": "word",
    "``lit``": "lit",
    "`<`": "`<`",
}


def pathological(pieces: dict[str, str]):
    """Lines of pieces separated by spaces: a few at random, then one piece repeated up to 20,000 times (the
    inputs hand-written patterns were quadratic on), then a few more."""
    piece = st.sampled_from(sorted(pieces))
    run = st.tuples(piece, st.integers(1, 20_000)).map(lambda pair: [pair[0]] * pair[1])
    return st.tuples(st.lists(piece, max_size=30), run, st.lists(piece, max_size=30)).map(
        lambda parts: [p for part in parts for p in part]
    )


def as_lines(pieces: list[str]) -> str:
    """Lines of at most 200 pieces (a line stays under the 64 K characters read at once)."""
    return "\n".join(" ".join(pieces[i : i + 200]) for i in range(0, len(pieces), 200))


# derandomize: the same 25 examples every run. Random ones found the case below, which the reader still gets wrong;
# until it is fixed, a run must not fail by the luck of the draw (the known case is its own test, strict xfail).
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(pieces=pathological(MD_PIECES))
@example(pieces=["["] * 20_000)  # the issue's reproduction, on lines of 400 characters
@example(pieces=["[", LINK, "]", "![", IMAGE])
def test_pathological_markdown_inline_markup_is_read_as_commonmark_reads_it(tmp_path, pieces):
    texts = read(tmp_path, f"# Brackets\n\nStart {as_lines(pieces)} end.\n")
    assert words(texts) == words(["Start", *(MD_PIECES[p] for p in pieces), "end."])


@pytest.mark.xfail(
    strict=True,
    reason="markdown-it-py's maxNesting (20) stops it reading an image nested in 209 open '![': CommonMark reads it; "
    "raising the limit needs the linear-time check of issue 57 redone",
)
def test_an_image_after_two_hundred_open_image_brackets_is_read_as_its_description(tmp_path):
    pieces = ["!["] * 209 + [IMAGE]
    texts = read(tmp_path, f"# Brackets\n\nStart {as_lines(pieces)} end.\n")
    assert words(texts) == words(["Start", *(MD_PIECES[p] for p in pieces), "end."])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(pieces=pathological(RST_PIECES))
@example(pieces=["`<`"] * 20_000)
def test_pathological_restructuredtext_inline_markup_is_read_as_its_text(tmp_path, pieces):
    texts = read(tmp_path, f"Title\n=====\n\nStart {as_lines(pieces)} end.\n", "rst")
    assert words(texts) == words(["Start", *(RST_PIECES[p] for p in pieces), "end."])


def test_a_heading_or_a_table_line_of_sixty_thousand_spaces_is_read(tmp_path):
    spaces = " " * 60_000
    texts = read(tmp_path, f"# Spaces{spaces}x ##\n\nBody text here.\n\na | b\n|-{spaces}x\n")
    assert texts[0] == "Body text here." and words(texts[1:]) == ["a", "|", "b", "|-", "x"]
    assert read_markup(tmp_path / "doc.md", "markdown").title.split() == ["Spaces", "x"]

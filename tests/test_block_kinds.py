"""Issue 32, "structure kept from the document readers": each reader gives the kind of its blocks (prose, heading,
list item with its order, code, table, admonition, caption, notice), the chunker carries them to every line of a
passage, both index backends store them (Milvus: tests/test_milvus.py), and `--json` shows them."""

from __future__ import annotations

import asyncio

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrag.corpus import iter_documents
from typedrag.corpus.chunker import iter_passages
from typedrag.index import build_index, open_retriever
from typedrag.index.tantivy import sync_index
from typedrag.records import Block, BlockKind, Document, LineKind, decode_lines, encode_lines, lines_of

from conftest import offline_pipeline, raw_pdf, read_blocks

PROSE, ITEM, CODE, TABLE = BlockKind.PROSE, BlockKind.ITEM, BlockKind.CODE, BlockKind.TABLE
ADMONITION, CAPTION, NOTICE, HEADING = BlockKind.ADMONITION, BlockKind.CAPTION, BlockKind.NOTICE, BlockKind.HEADING
PYTHON_TUTORIAL = Path("/usr/share/doc/python3.11/html/tutorial/controlflow.html")
HANDBOOK_FIREWALL = Path("/usr/share/doc/debian-handbook/html/en-US/sect.firewall-packet-filtering.html")


def kinds(blocks: list[Block]) -> list[tuple[str, int | None]]:
    return [(block.kind.value, block.order) for block in blocks]


def kind_of(blocks: list[Block], start: str) -> tuple[str, int | None]:
    """The kind and order of the one block whose text starts with `start`."""
    (block,) = [block for block in blocks if block.text.startswith(start)]
    return block.kind.value, block.order


# --- storing the kinds ---------------------------------------------------------------------------------------

line_kinds = st.builds(
    lambda kind, order: LineKind(kind, order if kind is ITEM else None),
    st.sampled_from(list(BlockKind)),
    st.none() | st.integers(1, 10**6),
)


@given(st.lists(line_kinds, max_size=40))
def test_stored_line_kinds_decode_to_what_was_encoded(lines):
    assert decode_lines(encode_lines(lines)) == tuple(lines)


@pytest.mark.parametrize("stored", ["", None, "p,,p", "x", "i0", "c2", "p,i-1", "P", "p ,i", "i1234567890"])
def test_a_bad_or_empty_stored_value_is_unknown(stored):
    assert decode_lines(stored) == ()


def test_stored_kinds_that_do_not_match_the_text_are_unknown():
    assert lines_of("one\ntwo", "p,i1") == (LineKind(), LineKind(ITEM, 1))
    assert lines_of("one\ntwo", "p") == ()  # one kind for two lines: not this passage's


# --- the chunker ----------------------------------------------------------------------------------------------

block_specs = st.lists(
    st.tuples(
        st.sampled_from(list(BlockKind)),
        st.none() | st.integers(1, 99),
        st.lists(st.lists(st.sampled_from(["w", "end.", "<b>", "x" * 1200, "é"]), max_size=70), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(block_specs, st.sampled_from([3, 20, 100]))
def test_the_chunker_gives_each_line_the_kind_of_the_block_it_came_from(specs, words):
    """Every word is tagged with its block's number; each passage line's words all come from one block, whose
    kind and order the line has, even where a passage begins in the middle of a long line."""
    blocks, owner = [], {}
    for number, (kind, order, lines) in enumerate(specs):
        order = order if kind is ITEM else None
        owner[number] = LineKind(kind, order)
        text = "\n".join(" ".join(f"{word}@{number}" for word in line) for line in lines)
        blocks.append(Block(text, (), None, kind, order))
    passages = list(iter_passages(Document("d", "t", blocks=blocks), words))
    for passage in passages:
        lines = passage.text.split("\n")
        assert len(passage.lines) == len(lines), (passage.text, passage.lines)
        for line, kind in zip(lines, passage.lines):
            sources = {token.rsplit("@", 1)[1].split("-")[0] for token in line.split() if "@" in token}
            assert len(sources) <= 1, line
            for source in sources:
                assert kind == owner[int(source)], (line, kind)


def test_a_line_cut_by_a_passage_keeps_its_kind_and_an_items_order_stays_on_each_of_its_lines():
    step = " ".join(f"step{i}" for i in range(250))  # one list item far longer than a passage
    blocks = [
        Block("Intro.", kind=PROSE),
        Block(f"2. {step}\nand its second line", kind=ITEM, order=2),
        Block("x = 1", kind=CODE),
    ]
    passages = list(iter_passages(Document("d", "t", blocks=blocks), 100))
    assert len(passages) >= 3
    assert passages[0].lines[0] == LineKind() and passages[0].lines[1] == LineKind(ITEM, 2)
    assert all(line == LineKind(ITEM, 2) for passage in passages[1:-1] for line in passage.lines)
    assert passages[-1].lines[-2:] == (LineKind(ITEM, 2), LineKind(CODE))


def test_a_plain_text_record_has_no_kinds():
    (passage,) = list(iter_passages(Document("d", "t", "Just a record with some words."), 100))
    assert passage.lines == ()


# --- each reader -------------------------------------------------------------------------------------------------

HTML_PAGE = """<!DOCTYPE html><html><head><title>Brewing</title></head><body><div role="main">
<h1>Brewing</h1><p>Tea needs fresh water.</p>
<ol><li>Boil the water.</li><li>Warm the pot<ul><li>with a splash</li></ul></li><li>Add the leaves.</li></ol>
<ol start="4"><li>Steep.</li><li value="9">Pour.</li></ol>
<ul><li>green</li><li>black</li></ul>
<div class="highlight"><pre>kettle --boil
pot --warm</pre></div>
<div class="admonition warning"><p class="admonition-title">Warning</p><p>The pot is hot.</p></div>
<div class="note"><h3 class="title">Note</h3><p>DocBook boxes count too.</p></div>
<table><caption>Steeping times</caption><tr><th>Tea</th><th>Minutes</th></tr><tr><td>green</td><td>2</td></tr></table>
<figure><img src="cup.png"/><figcaption>A full cup.</figcaption></figure>
<dl class="py function"><dt class="sig sig-object py">brew(tea, minutes=3)</dt><dd><p>Brew a pot.</p></dd></dl>
<div class="example"><p class="title"><strong>Example 1.1. A brewing script</strong></p><pre class="programlisting">brew green</pre></div>
<div class="legalnotice"><p>Copyright 2024 The Tea Society. All rights reserved.</p></div>
<p>Drink it warm.</p>
</div></body></html>"""


def test_html_kinds(tmp_path):
    (tmp_path / "brewing.html").write_text(HTML_PAGE)
    blocks = read_blocks(tmp_path / "brewing.html")
    assert kind_of(blocks, "Tea needs") == ("prose", None)
    assert [kind_of(blocks, f"- {text}") for text in ("Boil", "Warm", "with a splash", "Add")] == [
        ("item", 1),
        ("item", 2),
        ("item", None),
        ("item", 3),
    ]
    assert [kind_of(blocks, f"- {text}") for text in ("Steep", "Pour", "green", "black")] == [
        ("item", 4),
        ("item", 9),
        ("item", None),
        ("item", None),
    ]
    assert kind_of(blocks, "kettle --boil\npot --warm") == ("code", None)
    assert kind_of(blocks, "Warning\nThe pot is hot.") == ("admonition", None)  # one block, its title included
    assert kind_of(blocks, "Note\nDocBook boxes count too.") == ("admonition", None)
    assert kind_of(blocks, "Steeping times") == ("caption", None)
    assert kind_of(blocks, "Tea | Minutes") == ("table-head", 1) and kind_of(blocks, "green | 2") == ("table", 1)
    assert kind_of(blocks, "A full cup.") == ("caption", None)
    assert kind_of(blocks, "brew(tea, minutes=3)") == ("code", None)
    assert kind_of(blocks, "Brew a pot.") == ("prose", None)
    assert kind_of(blocks, "Example 1.1.") == ("caption", None) and kind_of(blocks, "brew green") == ("code", None)
    assert kind_of(blocks, "Copyright 2024") == ("notice", None)
    assert kind_of(blocks, "Drink it warm.") == ("prose", None)


def test_docx_kinds(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("Steps", level=1)
    document.add_paragraph("Tea needs fresh water.")
    for step in ("Boil the water.", "Warm the pot.", "Add the leaves."):
        document.add_paragraph(step, style="List Number")
    for tea in ("green", "black"):
        document.add_paragraph(tea, style="List Bullet")
    document.add_paragraph("Table 1: steeping times", style="Caption")
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("Tea", "Minutes"), ("green", "2")]):
        row.cells[0].text, row.cells[1].text = cells
    document.add_paragraph("Drink it warm.")
    document.save(tmp_path / "brewing.docx")
    blocks = read_blocks(tmp_path / "brewing.docx")
    assert kinds(blocks) == [
        ("prose", None),
        ("item", 1),
        ("item", 2),
        ("item", 3),
        ("item", None),
        ("item", None),
        ("caption", None),
        ("table", 1),  # the first table; its first row is not marked as its header, so it has no head
        ("prose", None),
    ]
    assert blocks[1].text == "- Boil the water." and blocks[1].section == ("Steps",)
    assert blocks[7].text == "Tea | Minutes\ngreen | 2"


MARKDOWN = """# Brewing

Tea needs fresh water
and a warm pot.

1. Boil the water.
2. Warm the pot
   with a splash.
3. Add the leaves:

   ```sh
   brew --green
   ```

4. Steep.

- green
- black
  - oolong

> **Note**
> The pot is hot.

> A proverb, quoted.

| Tea | Minutes |
|-----|---------|
| green | 2 |

    indented code

Drink it warm.
"""


def test_markdown_kinds(tmp_path):
    (tmp_path / "brewing.md").write_text(MARKDOWN)
    blocks = read_blocks(tmp_path / "brewing.md")
    assert [(block.kind.value, block.order, block.text) for block in blocks] == [
        ("prose", None, "Tea needs fresh water and a warm pot."),
        ("item", 1, "1. Boil the water."),
        ("item", 2, "2. Warm the pot with a splash."),
        ("item", 3, "3. Add the leaves:"),
        ("code", None, "brew --green"),
        ("item", 4, "4. Steep."),
        ("item", None, "- green"),
        ("item", None, "- black"),
        ("item", None, "- oolong"),
        ("admonition", None, "**Note**\nThe pot is hot."),
        ("prose", None, "A proverb, quoted."),
        ("table-head", 1, "Tea | Minutes"),
        ("table", 1, "green | 2"),
        ("code", None, "indented code"),
        ("prose", None, "Drink it warm."),
    ]


NODE_STYLE_MARKDOWN = """# Readline

A common use case for [`readline`][] is to consume a file [one line at a time][reading files]
(lines[2][3] keep brackets no label defines):

* `input` {stream.Readable} The [Readable][] stream to listen to.
  * `crlfDelay` {number} Read a [CR LF][] as one line break.
+ `output` {stream.Writable} See the [docs](https://nodejs.org/api/).

[`readline`]: #readline
[CR LF]: https://en.wikipedia.org/wiki/Newline
[Readable]: stream.md#readable-streams
[reading files]: #example-read-file-stream-line-by-line
"""


def test_markdown_reference_links_read_as_their_text_and_their_targets_are_no_text(tmp_path):
    (tmp_path / "readline.md").write_text(NODE_STYLE_MARKDOWN)
    blocks = read_blocks(tmp_path / "readline.md")
    assert [(block.kind.value, block.order, block.text) for block in blocks] == [
        (
            "prose",
            None,
            "A common use case for `readline` is to consume a file one line at a time (lines[2][3] keep brackets no label defines):",
        ),
        ("item", None, "- `input` {stream.Readable} The Readable stream to listen to."),
        ("item", None, "- `crlfDelay` {number} Read a CR LF as one line break."),
        ("item", None, "- `output` {stream.Writable} See the docs."),
    ]


def test_an_offline_answer_quotes_a_markdown_items_text_without_its_marker(tmp_path):
    (tmp_path / "tea.md").write_text(
        "# Tea\n\nWhich tea to choose:\n\n* Green tea wants water that has cooled for a few minutes after boiling.\n"
        "+ Black tea wants water that is fully boiling when it is poured.\n\nHow to brew:\n\n"
        "1. Boil fresh water in a clean kettle until it bubbles.\n2) Warm the teapot with a splash of the hot water.\n"
    )
    pipeline = offline_pipeline(tmp_path / "tea.md", tmp_path / "index")
    for question in ("What water temperature does green tea want?", "How do I boil water for tea in a kettle?"):
        answer = asyncio.run(pipeline.answer(question, "rag")).answer
        assert (
            answer and not answer.startswith(("* ", "+ ", "1. ", "2) ")) and " * " not in answer and " + " not in answer
        ), answer


RST = """.. Copyright 2024 The Tea Society.

=======
Brewing
=======

Tea needs fresh water.

#. Boil the water.
#. Warm the pot
   with a splash.
#. Add the leaves.

* green
* black

Run it like this::

    brew --green
    brew --black

.. code-block:: python

   brew("green")

.. note::

   The pot is hot.

.. warning:: Never boil green tea.

.. figure:: cup.png

   A full cup.

=====  =======
Tea    Minutes
=====  =======
green  2
=====  =======

.. toctree::

   steeping
   serving

Drink it warm.
"""


def test_restructuredtext_kinds(tmp_path):
    (tmp_path / "brewing.rst").write_text(RST)
    blocks = read_blocks(tmp_path / "brewing.rst")
    assert [(block.kind.value, block.order, block.text) for block in blocks] == [
        ("notice", None, "Copyright 2024 The Tea Society."),
        ("prose", None, "Tea needs fresh water."),
        ("item", 1, "1. Boil the water."),  # an item as every reader writes it: its number, or "- "
        ("item", 2, "2. Warm the pot with a splash."),
        ("item", 3, "3. Add the leaves."),
        ("item", None, "- green"),
        ("item", None, "- black"),
        ("prose", None, "Run it like this:"),
        ("code", None, "brew --green\nbrew --black"),
        ("code", None, 'brew("green")'),
        ("admonition", None, "Note\nThe pot is hot."),
        ("admonition", None, "Warning\nNever boil green tea."),
        ("caption", None, "A full cup."),
        ("table-head", 1, "Tea | Minutes"),  # a simple table's head and rows, as every reader writes a table
        ("table", 1, "green | 2"),
        ("notice", None, "steeping serving"),
        ("prose", None, "Drink it warm."),
    ]


def two_font_pdf(lines: list[tuple[str, float, str]]) -> bytes:
    """A one-page PDF of (font, y, text) lines: F1 is Helvetica, F2 Courier (a typewriter font)."""
    content = b"".join(
        b"BT /%s 10 Tf 72 %.1f Td (%s) Tj ET\n" % (font.encode(), y, text.encode("cp1252")) for font, y, text in lines
    )
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
    ]
    return raw_pdf(objects)


def test_pdf_kinds_where_the_pdf_tells(tmp_path):
    (tmp_path / "brewing.pdf").write_bytes(
        two_font_pdf(
            [
                ("F1", 700, "Tea needs fresh water and a warm pot, as every brewer knows."),
                ("F1", 686, "1. Boil the water in a clean kettle."),
                ("F1", 672, "2. Warm the pot with a splash."),
                ("F1", 658, "• green tea wants cooler water"),
                ("F1", 644, "• black tea wants it boiling"),
                ("F2", 620, "$ brew --green"),
                ("F2", 606, "$ brew --black"),
                ("F1", 580, "Drink it warm and share it with friends."),
            ]
        )
    )
    blocks = read_blocks(tmp_path / "brewing.pdf")
    assert [(block.kind.value, block.order, block.text) for block in blocks] == [
        ("prose", None, "Tea needs fresh water and a warm pot, as every brewer knows."),
        ("item", 1, "1. Boil the water in a clean kettle."),
        ("item", 2, "2. Warm the pot with a splash."),
        ("item", None, "• green tea wants cooler water"),
        ("item", None, "• black tea wants it boiling"),
        ("code", None, "$ brew --green\n$ brew --black"),  # a typewriter font: lines kept
        ("prose", None, "Drink it warm and share it with friends."),
    ]
    assert all(block.page == 1 for block in blocks)


def test_a_pdf_contents_page_is_navigation_not_prose(tmp_path):
    """Found labelling the Bash manual's PDF: "3.5.8 Filename Expansion . . . . . . 35" was read as prose, joined
    with the entries below it into one paragraph, and offered to answers as a sentence."""
    (tmp_path / "manual.pdf").write_bytes(
        two_font_pdf(
            [
                ("F1", 700, "Table of Contents"),
                ("F1", 686, "1 Introduction . . . . . . . . . . . . . . . . . . 1"),
                ("F1", 672, "1.1 What is Bash?. . . . . . . . . . . . . . . . . 1"),
                ("F1", 658, "3.6 Redirections. . . . . . . . . . . . . . . . . 38"),
                ("F1", 644, "Appendix A Reporting Bugs . . . . . . . . . . . . xii"),
                ("F1", 620, "Bash reads the startup files and then waits. . . for input."),
            ]
        )
    )
    blocks = read_blocks(tmp_path / "manual.pdf")
    assert [(block.kind.value, block.text) for block in blocks] == [
        ("prose", "Table of Contents"),
        ("notice", "1 Introduction . . . . . . . . . . . . . . . . . . 1"),  # one entry a line, each navigation
        ("notice", "1.1 What is Bash?. . . . . . . . . . . . . . . . . 1"),
        ("notice", "3.6 Redirections. . . . . . . . . . . . . . . . . 38"),
        ("notice", "Appendix A Reporting Bugs . . . . . . . . . . . . xii"),
        ("prose", "Bash reads the startup files and then waits. . . for input."),  # an ellipsis is prose
    ]


# --- through the index -----------------------------------------------------------------------------------------


def test_kinds_round_trip_through_the_tantivy_index_and_json(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "brewing.md").write_text(MARKDOWN)
    (docs / "brewing.rst").write_text(RST)
    (docs / "brewing.html").write_text(HTML_PAGE)
    expected = {
        passage.passage_id: passage for doc in iter_documents([docs], problems=[]) for passage in iter_passages(doc, 40)
    }
    assert any(line.kind is ITEM and line.order == 3 for p in expected.values() for line in p.lines)
    build_index([docs], tmp_path / "index", passage_words=40, show_progress=False)
    retriever = open_retriever(tmp_path / "index")
    found = {hit.passage_id: hit.passage for hit in retriever.search("tea water pot brew green warm", 100)}
    assert found == expected  # every field, the line kinds included

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "ask",
            "How do I brew green tea?",
            "--index",
            str(tmp_path / "index"),
            "--method",
            "rag",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))},
    )
    assert proc.returncode == 0, proc.stderr
    sources = json.loads(proc.stdout)["sources"]
    assert sources
    for source in sources:
        passage = expected[source["passage_id"]]
        assert source["lines"] == [{"kind": line.kind.value, "order": line.order} for line in passage.lines]


def test_an_index_built_before_kinds_were_kept_still_answers_and_a_sync_rebuilds_it(tmp_path, monkeypatch):
    """An index of the last format (no `lines` field, chunker 5), made by this code with the field left out."""
    import tantivy

    import typedrag.index.tantivy.build as tantivy_build

    (tmp_path / "brewing.md").write_text(MARKDOWN)
    real_schema = tantivy_build.schema

    def old_schema():
        builder = tantivy.SchemaBuilder()
        for name in ("passage_id", "doc_id", "file"):
            builder.add_text_field(name, stored=True, tokenizer_name="raw")
        for name in ("title", "section", "text"):
            builder.add_text_field(name, stored=True, tokenizer_name=tantivy_build.TOKENIZER, index_option="freq")
        builder.add_unsigned_field("position", stored=True, indexed=True)
        builder.add_unsigned_field("page", stored=True)
        builder.add_unsigned_field("page_end", stored=True)
        return builder.build()

    real_adder = tantivy_build._adder
    monkeypatch.setattr(tantivy_build, "schema", old_schema)
    monkeypatch.setattr(
        tantivy_build,
        "_adder",
        lambda writer: (
            lambda p, key: real_adder(writer)(
                p.__class__(p.passage_id, p.doc_id, p.title, p.text, p.section, p.page, p.page_end), key
            )
        ),
    )
    monkeypatch.setattr(tantivy_build, "CHUNKER_VERSION", 5)
    build_index([tmp_path / "brewing.md"], tmp_path / "index", passage_words=40, show_progress=False)
    monkeypatch.undo()
    assert real_schema is tantivy_build.schema

    hits = open_retriever(tmp_path / "index").search("boil water pot", 5)
    assert hits and all(hit.passage.lines == () for hit in hits)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "typedrag.cli",
            "ask",
            "How do I brew tea?",
            "--index",
            str(tmp_path / "index"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))},
    )
    assert proc.returncode == 0, proc.stderr
    assert all(source["lines"] == [] for source in json.loads(proc.stdout)["sources"])

    summary = sync_index([tmp_path / "brewing.md"], tmp_path / "index", passage_words=40, show_progress=False)
    assert not summary.synced  # another chunker version: read again from scratch
    hits = open_retriever(tmp_path / "index").search("boil water pot", 5)
    assert any(line.kind is ITEM for hit in hits for line in hit.passage.lines)


# --- real Debian manuals ----------------------------------------------------------------------------------------


def require(path: Path, package: str) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found: apt-get install {package}")


def test_python_tutorial_passages_have_item_and_code_lines(tmp_path):
    require(PYTHON_TUTORIAL, "python3.11-doc")
    build_index(
        [PYTHON_TUTORIAL], tmp_path / "index", show_progress=False, retrieval="bm25"
    )  # the searches below are BM25's
    retriever = open_retriever(tmp_path / "index")
    range_hits = retriever.search("range function sequence of numbers for loop", 5)
    code_lines = [
        line
        for hit in range_hits
        for text, line in zip(hit.passage.text.split("\n"), hit.passage.lines)
        if line.kind is CODE
    ]
    assert code_lines, [hit.passage.text for hit in range_hits]
    style = retriever.search("coding style indentation 4 spaces tabs docstrings", 3)
    items = [
        text
        for hit in style
        for text, line in zip(hit.passage.text.split("\n"), hit.passage.lines)
        if line.kind is ITEM
    ]
    assert "- Use 4-space indentation, and no tabs." in items
    assert "- Use docstrings." in items


def test_debian_handbook_passages_have_an_ordered_list_and_code_lines(tmp_path):
    require(HANDBOOK_FIREWALL, "debian-handbook")
    build_index([HANDBOOK_FIREWALL], tmp_path / "index", show_progress=False)
    retriever = open_retriever(tmp_path / "index")
    layers = retriever.search(
        "OSI model layers physical data link network transport session presentation application", 3
    )
    orders = {
        line.order: text
        for hit in layers
        for text, line in zip(hit.passage.text.split("\n"), hit.passage.lines)
        if line.kind is ITEM and line.order is not None
    }
    assert sorted(orders) == [1, 2, 3, 4, 5, 6, 7], orders
    assert orders[1].startswith("- Physical") and orders[7].startswith("- Application")
    rules = retriever.search("nft add rule chain accept drop", 5)
    assert any(line.kind is CODE for hit in rules for line in hit.passage.lines)

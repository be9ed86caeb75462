"""A table's header row is its head (TABLE_HEAD), repeated where a passage continues its rows; an offline answer may
quote a row under its head, named by it ("Option: X; Default value: Y."): a question whose answer is a value in a
table is answered with its row (issue 55). Rows the head does not fit, and tables that only lay out a page, are
not named."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typedrag.corpus import iter_documents
from typedrag.corpus.chunker import iter_passages
from typedrag.reader import quoted_pieces
from typedrag.records import Block, BlockKind

from conftest import offline_pipeline, quoted_pieces_of, read_blocks

HEAD, TABLE = BlockKind.TABLE_HEAD, BlockKind.TABLE


def named(path: Path) -> list[str]:
    """The table rows an answer may quote from the passages of the one document at `path`, named by their head."""
    return [piece for piece, kind in quoted_pieces_of(path, 1, 60) if kind.kind is TABLE]


def lines_of(blocks: list[Block]) -> list[tuple[BlockKind, str]]:
    """Every line of every block, with its block's kind."""
    return [(block.kind, line) for block in blocks for line in block.text.split("\n")]


def page(body: str) -> str:
    return f"<!DOCTYPE html><html><head><title>Build</title></head><body><div role='main'><h1>Build</h1>{body}</div></body></html>"


def test_a_header_row_is_the_head_that_names_the_cells_of_every_row_under_it(tmp_path):
    (tmp_path / "build.html").write_text(
        page(
            "<table><thead><tr><th>Option</th><th>Default value</th><th>Description</th></tr></thead><tbody>"
            "<tr><td><code>CMAKE_INSTALL_PREFIX</code></td><td>/usr/local</td><td>Where it is installed.</td></tr>"
            "<tr><td>ENABLE_DOC</td><td></td><td>Build the documentation.</td></tr>"
            "<tr><td>ENABLE_NLS</td><td>ON.</td><td>Translations</td></tr></tbody></table>"
        )
    )
    assert lines_of(read_blocks(tmp_path / "build.html")) == [
        (HEAD, "Option | Default value | Description"),
        (TABLE, "CMAKE_INSTALL_PREFIX | /usr/local | Where it is installed."),
        (TABLE, "ENABLE_DOC |  | Build the documentation."),  # an empty cell keeps its place
        (TABLE, "ENABLE_NLS | ON. | Translations"),
    ]
    assert named(tmp_path / "build.html") == [
        "Option: CMAKE_INSTALL_PREFIX; Default value: /usr/local; Description: Where it is installed.",
        "Option: ENABLE_DOC; Description: Build the documentation.",  # an empty cell is left out
        "Option: ENABLE_NLS; Default value: ON; Description: Translations.",  # a full stop ends the row
    ]


def test_rows_the_head_does_not_fit_are_not_named(tmp_path):
    (tmp_path / "build.html").write_text(
        page(
            # a header spanning columns names no single cell: no head
            "<table><tr><th colspan='2'>Keys</th></tr><tr><td>F5</td><td>previous buffer</td></tr></table>"
            # a row with a cell fewer than the head (a rowspan above it) is not named wrongly
            "<table><tr><th>Key</th><th>Action</th><th>Command</th></tr>"
            "<tr><td rowspan='2'>F6</td><td>next</td><td>/buffer +1</td></tr><tr><td>again</td><td>/buffer +1</td></tr>"
            "</table>"
            # no header at all; a first cell of its own ("Default" beside "4MB") is no head of the columns
            "<table><tr><td>a</td><td>b</td></tr><tr><th>Default</th><td>4MB</td></tr></table>"
        )
    )
    assert lines_of(read_blocks(tmp_path / "build.html")) == [
        (TABLE, "Keys"),
        (TABLE, "F5 | previous buffer"),
        (HEAD, "Key | Action | Command"),
        (TABLE, "F6 | next | /buffer +1"),
        (TABLE, "again | /buffer +1"),
        (TABLE, "a | b"),
        (TABLE, "Default | 4MB"),
    ]
    assert named(tmp_path / "build.html") == ["Key: F6; Action: next; Command: /buffer +1."]


def test_a_one_row_table_in_a_note_is_the_notes_text_not_a_table(tmp_path):
    """Asciidoctor lays a note out as a table of one row: its icon in one cell, its text in the next."""
    (tmp_path / "build.html").write_text(
        page(
            '<div class="admonitionblock note"><table><tr><td class="icon"><div class="title">Note</div></td>'
            '<td class="content">On macOS, you can use Homebrew to build it from source.</td></tr></table></div>'
        )
    )
    assert lines_of(read_blocks(tmp_path / "build.html")) == [
        (BlockKind.ADMONITION, "Note"),
        (BlockKind.ADMONITION, "On macOS, you can use Homebrew to build it from source."),
    ]


def test_a_markdown_pipe_tables_header_row_is_its_head_and_a_long_table_keeps_it_in_every_passage(tmp_path):
    rows = "".join(f"| key{n} | does thing number {n} with some words to fill the line |\n" for n in range(300))
    (tmp_path / "keys.md").write_text(f"# Keys\n\n| Key | Action |\n| --- | --- |\n{rows}\nAfter the table.\n")
    lines = lines_of(read_blocks(tmp_path / "keys.md"))
    assert lines[0] == (HEAD, "Key | Action")
    assert lines[1:301] == [
        (TABLE, f"key{n} | does thing number {n} with some words to fill the line") for n in range(300)
    ]
    assert lines[301:] == [(BlockKind.PROSE, "After the table.")]
    assert named(tmp_path / "keys.md") == [
        f"Key: key{n}; Action: does thing number {n} with some words to fill the line." for n in range(300)
    ]


RST_TABLES = """Build options
=============

+-------------------+------------------+----------------------------------+
| Option            | Default          | Description                      |
+===================+==================+==================================+
| ``ENABLE_PERL``   | ``ON``           | Build the Perl plugin, which     |
|                   |                  | runs scripts written in Perl.    |
+-------------------+------------------+----------------------------------+
| ``ENABLE_TCL``    | Builds the Tcl plugin (no default).                 |
+-------------------+------------------+----------------------------------+

==========  ==========================
Key         Action
==========  ==========================
Ctrl+L      Redraw the whole window.
Alt+J       Jump to a buffer by its
            number.
==========  ==========================

+------+
| not a table's border
"""


def test_a_restructuredtext_grid_or_simple_tables_head_names_its_rows(tmp_path):
    """reStructuredText's tables were kept as their ASCII art, so no row could be quoted: docutils' table parsers
    now read their cells (one over two lines, one spanning columns, markup dropped), as the other readers' rows."""
    (tmp_path / "build.rst").write_text(RST_TABLES)
    lines = lines_of(read_blocks(tmp_path / "build.rst"))
    assert lines[:3] == [
        (HEAD, "Option | Default | Description"),
        (TABLE, "ENABLE_PERL | ON | Build the Perl plugin, which runs scripts written in Perl."),
        (TABLE, "ENABLE_TCL | Builds the Tcl plugin (no default). |"),  # the spanned-over column is empty
    ]
    assert lines[3:6] == [
        (HEAD, "Key | Action"),
        (TABLE, "Ctrl+L | Redraw the whole window."),
        (TABLE, "Alt+J | Jump to a buffer by its number."),
    ]
    assert lines[6:] == [(TABLE, "+------+"), (TABLE, "| not a table's border")]  # not read as a table: as it was
    assert named(tmp_path / "build.rst") == [
        "Option: ENABLE_PERL; Default: ON; Description: Build the Perl plugin, which runs scripts written in Perl.",
        "Option: ENABLE_TCL; Default: Builds the Tcl plugin (no default).",
        "Key: Ctrl+L; Action: Redraw the whole window.",
        "Key: Alt+J; Action: Jump to a buffer by its number.",
    ]


def test_a_restructuredtext_table_directives_grid_is_read_and_a_list_table_kept_as_it_was(tmp_path):
    (tmp_path / "keys.rst").write_text(
        "Keys\n====\n\n.. table:: Keys of the editor\n   :widths: auto\n\n   ======  ===========\n   Key     Action\n"
        "   ======  ===========\n   Ctrl+L  Redraw.\n   ======  ===========\n\n.. list-table:: Others\n"
        "   :header-rows: 1\n\n   * - Key\n     - Action\n\nAfter.\n"
    )
    lines = lines_of(read_blocks(tmp_path / "keys.rst"))
    assert lines == [
        (BlockKind.CAPTION, "Keys of the editor"),
        (HEAD, "Key | Action"),
        (TABLE, "Ctrl+L | Redraw."),
        (BlockKind.CAPTION, "Others"),
        (TABLE, "* - Key"),  # docutils' table parsers read grids, not a list-table's items: as before
        (TABLE, "  - Action"),
        (BlockKind.PROSE, "After."),
    ]


def test_a_word_tables_first_row_is_its_head_when_marked_as_the_header(tmp_path):
    import docx
    from docx.oxml import OxmlElement

    document = docx.Document()
    for marked in (True, False):
        table = document.add_table(rows=3, cols=2)
        for row, cells in zip(table.rows, [("Tea", "Minutes"), ("green", "2"), ("black", "4")]):
            row.cells[0].text, row.cells[1].text = cells
        if marked:  # Word's "Repeat as header row"
            table.rows[0]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))
    document.save(tmp_path / "tea.docx")
    assert lines_of(read_blocks(tmp_path / "tea.docx")) == [
        (HEAD, "Tea | Minutes"),
        (TABLE, "green | 2"),
        (TABLE, "black | 4"),
        (TABLE, "Tea | Minutes"),  # no header marked: the first row may be data
        (TABLE, "green | 2"),
        (TABLE, "black | 4"),
    ]
    assert named(tmp_path / "tea.docx") == ["Tea: green; Minutes: 2.", "Tea: black; Minutes: 4."]


def test_every_passage_of_a_long_table_holds_its_head_and_is_cut_between_two_rows(tmp_path):
    rows = "".join(
        f"<tr><td>key{n}</td><td>does thing number {n} and then some more words</td></tr>" for n in range(60)
    )
    (tmp_path / "keys.html").write_text(
        page(f"<p>Keys to know.</p><table><tr><th>Key</th><th>Action</th></tr>{rows}</table>")
    )
    (doc,) = list(iter_documents([tmp_path / "keys.html"], problems=[]))
    passages = list(iter_passages(doc, words=100))
    assert len(passages) > 3
    for passage in passages:
        lines = passage.text.split("\n")
        at = lines.index("Key | Action")  # the head, before the first row that begins in the passage
        assert passage.lines[at].kind is HEAD and all(kind.kind is TABLE for kind in passage.lines[at + 1 :])
        assert all(line.startswith("key") and line.endswith(" words") for line in lines[at + 1 :]), lines
    assert named(tmp_path / "keys.html") == [
        f"Key: key{n}; Action: does thing number {n} and then some more words." for n in range(60)
    ]


def test_a_passage_that_begins_inside_a_row_keeps_that_rows_tail_unnamed_above_the_head():
    from typedrag.records import Document

    row = " ".join(f"w{n}" for n in range(150))  # a row longer than a passage: cut inside it
    blocks = [Block("Name | Description", kind=HEAD), Block(f"alpha | {row}\nbeta | short", kind=TABLE)]
    passages = list(iter_passages(Document("d", "t", blocks=blocks), 100))
    assert len(passages) == 2
    second = passages[1]
    assert second.text.split("\n")[1:] == ["Name | Description", "beta | short"]
    assert second.lines[0].kind is TABLE and second.lines[1].kind is HEAD
    pieces = [piece for piece, _ in quoted_pieces(second.text, second.lines, 1, 60)]
    assert pieces == ["Name: beta; Description: short."]


CMAKE_PAGE = page(
    "<h2>Compile with CMake</h2><p>WeeChat is built with CMake: make a build directory, run cmake in it, then make"
    " and make install. The options below change what is built and where it goes.</p>"
    "<table><thead><tr><th>Option</th><th>Values</th><th>Default value</th><th>Description</th></tr></thead><tbody>"
    "<tr><td>CMAKE_BUILD_TYPE</td><td>Debug, Release</td><td></td><td>The type of build.</td></tr>"
    "<tr><td>CMAKE_INSTALL_PREFIX</td><td>directory</td><td>/usr/local</td>"
    "<td>The directory where WeeChat will be installed.</td></tr>"
    "<tr><td>ENABLE_ALIAS</td><td>ON, OFF</td><td>ON</td><td>Compile the alias plugin.</td></tr>"
    "<tr><td>ENABLE_DOC</td><td>ON, OFF</td><td>OFF</td><td>Build the HTML documentation.</td></tr>"
    "</tbody></table>"
)


def test_an_offline_answer_quotes_the_row_that_holds_the_answer(tmp_path):
    """Before, table lines were never quoted: the passage ranked first and the answer abstained."""
    (tmp_path / "user.html").write_text(CMAKE_PAGE)
    pipeline = offline_pipeline(tmp_path / "user.html", tmp_path / "index")
    result = asyncio.run(
        pipeline.answer("Where does WeeChat get installed by default when I build it with CMake?", "rag")
    )
    assert "Option: CMAKE_INSTALL_PREFIX; Values: directory; Default value: /usr/local" in result.answer, result.answer
    assert not result.abstained


def test_the_viewer_shows_a_word_table_as_a_table_and_finds_a_passage_that_continues_it(tmp_path):
    """A cited passage of a long table, its head repeated above its rows, is still found in the document shown."""
    import docx
    from docx.oxml import OxmlElement

    from typedrag.library.viewer import render

    document = docx.Document()
    document.add_paragraph("Keys to know.")
    table = document.add_table(rows=61, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "Key", "Action"
    table.rows[0]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))
    for n, row in enumerate(table.rows[1:]):
        row.cells[0].text, row.cells[1].text = f"key{n}", f"does thing number {n} and then some more words"
    document.add_paragraph("After the table.")
    document.save(tmp_path / "keys.docx")
    (doc,) = list(iter_documents([tmp_path / "keys.docx"], problems=[]))
    later = [passage for passage in iter_passages(doc) if passage.text.startswith("Key | Action")][-1]
    shown = render(tmp_path / "keys.docx", "keys.docx", later.text)
    assert shown["located"], later.text
    assert "<th>Key</th><th>Action</th>" in shown["html"] and "<td>key0</td>" in shown["html"]  # a row not cited
    assert "<pre>" not in shown["html"]

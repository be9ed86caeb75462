"""A definition list's term (HTML `<dt>`) is a TERM line, and the first piece of its definition is quoted named by
it ("temp_buffers (integer): Sets the maximum ..."): a definition seldom repeats what it defines, so a question
naming the setting found the definition's sentences without the setting's name (issue 55 item 2)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typedrag.corpus import iter_documents
from typedrag.records import BlockKind

from conftest import offline_pipeline, quoted_pieces_of, read_blocks

SETTINGS = """<!DOCTYPE html><html><head><title>Resource Consumption</title></head><body><div role="main">
<h1>Resource Consumption</h1>
<p>These settings control how much memory the server uses for its work and its caches.</p>
<div class="variablelist"><dl>
<dt id="guc-shared-buffers"><span class="term"><code>shared_buffers</code> (<code>integer</code>)</span></dt>
<dd><p>Sets the amount of memory the database server uses for shared memory buffers. The default is typically
128 megabytes.</p></dd>
<dt id="guc-temp-buffers"><span class="term"><code>temp_buffers</code> (<code>integer</code>)</span></dt>
<dd><p>Sets the maximum amount of memory used for temporary buffers within each database session. These are
session-local buffers used only for access to temporary tables.</p></dd>
<dt><span class="term"><code>work_mem</code> (<code>integer</code>)</span></dt>
<dd><p>The work_mem setting caps the memory a sort or hash operation uses before it writes to temporary files.</p></dd>
</dl></div>
<dl class="py function"><dt class="sig sig-object py">brew(tea, minutes=3)</dt><dd><p>Brew a pot of tea.</p></dd></dl>
</div></body></html>"""


def pieces(path: Path) -> list[str]:
    return [piece for piece, _ in quoted_pieces_of(path)]


def test_a_terms_definition_is_quoted_named_by_it(tmp_path):
    (tmp_path / "resource.html").write_text(SETTINGS)
    (doc,) = list(iter_documents([tmp_path / "resource.html"], problems=[]))
    kinds = {block.text: block.kind for block in doc.iter_blocks()}
    assert kinds["temp_buffers (integer)"] is BlockKind.TERM
    assert kinds["brew(tea, minutes=3)"] is BlockKind.CODE  # an API signature stays code
    assert pieces(tmp_path / "resource.html") == [
        "These settings control how much memory the server uses for its work and its caches.",
        "shared_buffers (integer): Sets the amount of memory the database server uses for shared memory buffers.",
        "The default is typically 128 megabytes.",  # only the first piece is named
        "temp_buffers (integer): Sets the maximum amount of memory used for temporary buffers within each database "
        "session.",
        "These are session-local buffers used only for access to temporary tables.",
        # a definition that names its term already is not named again
        "The work_mem setting caps the memory a sort or hash operation uses before it writes to temporary files.",
        "Brew a pot of tea.",
    ]


def test_an_offline_answer_names_the_setting_it_quotes(tmp_path):
    """Before, the answer quoted "Sets the maximum amount of memory ..." with nothing saying which setting it is."""
    (tmp_path / "resource.html").write_text(SETTINGS)
    pipeline = offline_pipeline(tmp_path / "resource.html", tmp_path / "index")
    result = asyncio.run(pipeline.answer("What is temp_buffers for?", "rag"))
    assert "temp_buffers (integer): Sets the maximum amount of memory used for temporary buffers" in result.answer, (
        result.answer
    )


def test_a_table_of_contents_entry_or_a_term_without_definition_names_nothing(tmp_path):
    """PostgreSQL's chapter pages open with a table of contents as a <dl> of <dt> entries and no <dd>: the last entry
    named the section's first sentence ("55.5.3. Logical Replication Protocol Message Flow: This section ...")."""
    (tmp_path / "protocol.html").write_text(
        "<!DOCTYPE html><html><head><title>Protocol</title></head><body><div role='main'><h1>Protocol</h1>"
        "<div class='toc'><dl class='toc'><dt><span class='sect2'><a href='#a'>55.5.1. Parameters</a></span></dt>"
        "<dt><span class='sect2'><a href='#b'>55.5.3. Message Flow</a></span></dt></dl></div>"
        "<p>This section describes the logical replication protocol and its message flow.</p>"
        "<dl><dt>orphan term</dt></dl><p>A paragraph after a term that has no definition of its own.</p>"
        "</div></body></html>"
    )
    assert pieces(tmp_path / "protocol.html") == [
        "This section describes the logical replication protocol and its message flow.",
        "A paragraph after a term that has no definition of its own.",
    ]


RST_SETTINGS = """Resource Consumption
====================

These settings control how much memory the server uses.

``temp_buffers`` (integer)
    Sets the maximum amount of memory used for temporary buffers within each
    database session.

    These are session-local buffers.

:param size: a field list's field, continued
    on an indented line, is no term.

A paragraph whose lines
line up is no term either.
"""


def test_a_restructuredtext_definition_lists_term_names_its_definition(tmp_path):
    """reStructuredText's definition list ran its term into the definition's first sentence ("temp_buffers (integer)
    Sets the maximum ..."): a line with lines indented under it is a term (docutils' rule), as HTML's <dt> is."""
    (tmp_path / "resource.rst").write_text(RST_SETTINGS)
    kinds = [(block.kind, block.text) for block in read_blocks(tmp_path / "resource.rst")]
    assert (BlockKind.TERM, "temp_buffers (integer)") in kinds
    assert not any(kind is BlockKind.TERM and text.startswith(":param") for kind, text in kinds)
    assert pieces(tmp_path / "resource.rst") == [
        "These settings control how much memory the server uses.",
        "temp_buffers (integer): Sets the maximum amount of memory used for temporary buffers within each database "
        "session.",
        "These are session-local buffers.",
        ":param size: a field list's field, continued on an indented line, is no term.",
        "A paragraph whose lines line up is no term either.",
    ]

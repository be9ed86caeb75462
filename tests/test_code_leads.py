"""A sentence that leads into a one-line code block ("To deactivate a virtual environment, type:") is quoted with it:
alone it promises what it does not say, and the judges counted it as noise (issue 55 item 2: a code block with its
lead sentence)."""

from __future__ import annotations

import asyncio

from conftest import offline_pipeline, quoted_pieces_of

PAGE = """<!DOCTYPE html><html><head><title>Windows</title></head><body><div role="main"><h1>Windows</h1>
<p>If you split the screen, you will see many windows at the same time. To split the screen vertically into a small
and a large window, use command:</p>
<pre>/window splitv 33</pre>
<p>To undo it, merge the windows with:</p>
<pre>/window merge
/window refresh</pre>
<p>A short script follows here:</p>
<pre>for window in windows:
    merge(window)</pre>
<p>A long script follows here:</p>
<pre>step one
step two
step three
step four
step five
step six
step seven
step eight
step nine</pre>
<p>And a sentence that leads into nothing:</p>
<p>The end of the page, some words to read.</p>
</div></body></html>"""


def test_a_sentence_leading_into_a_short_code_block_is_quoted_with_it(tmp_path):
    (tmp_path / "windows.html").write_text(PAGE)
    assert [piece for piece, _ in quoted_pieces_of(tmp_path / "windows.html")] == [
        "If you split the screen, you will see many windows at the same time.",
        "To split the screen vertically into a small and a large window, use command: `/window splitv 33`",
        "To undo it, merge the windows with:\n```\n/window merge\n/window refresh\n```",  # fenced, lines kept
        "A short script follows here:\n```\nfor window in windows:\n    merge(window)\n```",  # and its indentation
        "A long script follows here:",  # nine lines: more than an answer quotes
        "And a sentence that leads into nothing:",
        "The end of the page, some words to read.",
    ]


def test_an_offline_answer_gives_the_command_its_sentence_announces(tmp_path):
    """Before, the answer ended "..., use command:" and the command was only in the source."""
    (tmp_path / "windows.html").write_text(PAGE)
    pipeline = offline_pipeline(tmp_path / "windows.html", tmp_path / "index")
    result = asyncio.run(
        pipeline.answer("How do I split the screen vertically into a small and a large window?", "rag")
    )
    assert "use command: `/window splitv 33`" in result.answer, result.answer


SQLITE = """<!DOCTYPE html><html><head><title>SQLite</title></head><body><div role="main"><h1>SQLite</h1>
<h2>Foreign Key Support</h2>
<p>SQLite supports FOREIGN KEY syntax when emitting CREATE statements for tables, however by default these
constraints have no effect on the operation of the table. Constraint checking on SQLite has three prerequisites.
SQLAlchemy allows for the PRAGMA statement to be emitted automatically for new connections through the usage of
events:</p>
<pre>from sqlalchemy import event

@event.listens_for(Engine, "connect")
def set_sqlite_pragma(dbapi_connection, connection_record):
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()</pre>
<p>When SQLite foreign keys are enabled, it is not possible to emit CREATE or DROP statements for tables that
contain mutually-dependent foreign key constraints.</p>
</div></body></html>"""


def test_an_offline_answer_quotes_a_short_code_block_whole_with_its_indentation(tmp_path):
    """SQLAlchemy's held-out instruction questions were answered without the code that does the task (the listener
    that turns SQLite's foreign keys on): a code block of a few lines is quoted after the sentence that leads into
    it, fenced, its lines and indentation as the page has them, the source's marker before the fence."""
    (tmp_path / "sqlite.html").write_text(SQLITE)
    pipeline = offline_pipeline(tmp_path / "sqlite.html", tmp_path / "index")
    result = asyncio.run(pipeline.answer("How do I make SQLite enforce foreign keys with SQLAlchemy events?", "rag"))
    assert (
        'through the usage of events: [1]\n```\nfrom sqlalchemy import event\n@event.listens_for(Engine, "connect")\n'
        "def set_sqlite_pragma(dbapi_connection, connection_record):\n    cursor = dbapi_connection.cursor()\n"
        '    cursor.execute("PRAGMA foreign_keys=ON")\n    cursor.close()\n```'
    ) in result.answer, result.answer
    after = result.answer.split("```")[-1]
    assert after == "" or after.startswith("\n"), result.answer  # a closing fence ends its line


def test_a_passage_keeps_a_code_lines_indentation_within_its_character_cap():
    """Passages kept a code line's words only, so `def f():` and the body under it came back at one depth: wrong
    Python, quoted. A code line keeps its indentation (tabs as four spaces, at most MAX_INDENT), and a passage of
    deeply indented one-word lines still holds at most MAX_PASSAGE_CHARS characters."""
    from typedrag.corpus.chunker import MAX_INDENT, MAX_PASSAGE_CHARS, iter_passages
    from typedrag.records import Block, BlockKind, Document

    code = "def f():\n\tif x:\n        return 1\n" + "\n".join(" " * 40 + f"w{n}" for n in range(2000))
    doc = Document("a.py.html", "A", blocks=[Block(code, ("A",), None, BlockKind.CODE)])
    passages = list(iter_passages(doc))
    assert passages[0].text.startswith("def f():\n    if x:\n        return 1\n" + " " * MAX_INDENT + "w0\n")
    assert all(len(p.text) <= MAX_PASSAGE_CHARS for p in passages)
    assert sum(len(p.text.split()) for p in passages) == 6 + 2000  # no word lost or repeated


def test_a_passage_is_cut_where_a_line_begins_when_no_sentence_ends_near_the_cut():
    """Code has no full stops, so the cut near 100 words found no sentence end and fell on the 100th word: Tornado's
    guide gave a passage ending "... **settings)\\nIf" and one opening "xsrf_cookies is set, the Tornado web
    application will ...", quoted offline as a claim with its condition gone. With no sentence end near the cut, it
    moves to the nearest line start."""
    from typedrag.corpus.chunker import iter_passages
    from typedrag.records import Block, BlockKind, Document

    lead = Block(" ".join(f"w{n}" for n in range(60)) + " include the setting:", ("A",), None, BlockKind.PROSE)
    code = Block("\n".join(f"setting_{n} = {n}" for n in range(12)), ("A",), None, BlockKind.CODE)  # "If": word 100
    after = Block(
        "If xsrf_cookies is set, the application sets a cookie for all users and rejects every form post that lacks "
        "the cookie's value in a hidden field named after it, which every template that posts a form to the "
        "application must therefore include. " + " ".join(f"v{n}" for n in range(30)) + ".",
        ("A",),
        None,
        BlockKind.PROSE,
    )
    passages = list(iter_passages(Document("a.html", "A", blocks=[lead, code, after])))
    assert len(passages) == 2
    assert passages[1].text.startswith("If xsrf_cookies is set,"), [p.text[-40:] for p in passages]
    assert passages[0].text.endswith("setting_11 = 11")

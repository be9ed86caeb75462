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
<p>A long script follows here:</p>
<pre>step one
step two
step three
step four</pre>
<p>And a sentence that leads into nothing:</p>
<p>The end of the page, some words to read.</p>
</div></body></html>"""


def test_a_sentence_leading_into_a_short_code_block_is_quoted_with_it(tmp_path):
    (tmp_path / "windows.html").write_text(PAGE)
    assert [piece for piece, _ in quoted_pieces_of(tmp_path / "windows.html")] == [
        "If you split the screen, you will see many windows at the same time.",
        "To split the screen vertically into a small and a large window, use command: `/window splitv 33`",
        "To undo it, merge the windows with:",  # two lines of code: joined, they would lose their breaks
        "A long script follows here:",
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

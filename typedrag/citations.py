"""Citation markers: what counts as one, and the two rules that keep them honest.

An answer cites passage n as `[n]`. A run of markers (`[2]`, `[1][4]`, `[1] [4]`) counts only where it
does not follow a word or a closing bracket, so code such as `a[0]` or `m[1][2]` is never a citation.

1. Markers that come *with a passage* (Wikipedia's reference marks, or text planted to pin a claim
   on other sources: "... robots [2][3].", "lead pipes[2][3]", a title "Rome notes [2]") are removed
   from its text, title and section before the passage is numbered and shown to any engine or reader,
   so every marker in an answer was written by the engine.
2. A marker naming no source the step was given is not a citation: it is removed, and the caller
   records it.
"""

from __future__ import annotations

import re

_RUN = re.compile(r"(?<![\w\]])[ \t]?\[\d{1,3}\](?:[ \t]?\[\d{1,3}\])*")
_NUMBER = re.compile(r"\[(\d{1,3})\]")
# A run glued to the end of a prose word or a year, then a space, closing punctuation or the end: a reference
# mark copied with the text ("pipes[2][3] and", "red[4].", "in 1912[5]"). An index in code stays: after a
# one-letter name (a[0], m[1][2]), a name inside an expression (sys.argv[1], f(x[2]), my_list[0]), or before
# an assignment or comparison (rows[0] = 1). A plain word's index then a space or the end reads as a mark and
# goes ("return data[0]" -> "return data"): a quoted code line loses it, no claim is pinned on a source.
_GLUED = re.compile(
    r"(?<![^\s\"'“‘(])(?<!\S\()"  # the word opens the text or follows a space, a quote, or a bracket after a space
    r"([^\W\d_]{2,}(?:[-'’][^\W\d_]+)*|\d{1,4})"  # a word of letters ("pipes", "well-known") or a year
    r"(?:\[\d{1,3}\])+"
    r"(?=[.,;:!?\"'”’)]*(?:\s|$))(?![ \t]*(?:[-+*/%&|^<>!=]?=|->))"
)


def marker_runs(text: str) -> list[re.Match[str]]:
    """Every run of citation markers in `text`, in order."""
    return list(_RUN.finditer(text))


def cited_numbers(text: str) -> list[int]:
    """The numbers `text` cites, in order of first mention."""
    return list(dict.fromkeys(int(n) for run in marker_runs(text) for n in _NUMBER.findall(run.group())))


def strip_markers(text: str) -> str:
    """`text` without its citation markers: what a passage says, never whom it claims to cite."""
    return _RUN.sub("", text)


def strip_reference_marks(text: str) -> str:
    """Text that came with the corpus (a passage, its title, its section) without the markers it carries:
    citation runs, and runs glued to a word (`strip_markers` leaves those, as in an answer they are no citation)."""
    return _GLUED.sub(r"\1", strip_markers(text))


def keep_known(text: str, known: set[int]) -> tuple[str, list[int]]:
    """(`text` with every marker naming a number outside `known` removed, the numbers removed)."""
    removed: list[int] = []

    def rewrite(run: re.Match[str]) -> str:
        numbers = [int(n) for n in _NUMBER.findall(run.group())]
        kept = [n for n in numbers if n in known]
        removed.extend(n for n in numbers if n not in known)
        if len(kept) == len(numbers):
            return run.group()
        return (" " if run.group()[:1] in " \t" and kept else "") + "".join(f"[{n}]" for n in kept)

    return _RUN.sub(rewrite, text), list(dict.fromkeys(removed))

"""User questions: the checks before any work is spent on them. (How a question is phrased is read in
typedrag.phrasing.questions.)"""

from __future__ import annotations

import re
import unicodedata

from typedrag.errors import QuestionError

DEFAULT_MAX_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0, DEL and C1 (\x9b is an 8-bit escape)
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # undecodable bytes from a non-UTF-8 terminal or file


def clean_question(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Normalised question text: NFC, control characters removed, undecodable bytes as U+FFFD, whitespace collapsed."""
    if not isinstance(text, str):
        raise QuestionError("the question must be text")
    text = unicodedata.normalize("NFC", _SURROGATE.sub("\ufffd", _CONTROL.sub(" ", text)))
    text = " ".join(text.split())
    if not text:
        raise QuestionError('the question is empty; ask something, e.g. typedrag ask "Why is the sky blue?"')
    if len(text) > max_chars:
        raise QuestionError(
            f"the question is {len(text)} characters long, over the limit of {max_chars}; shorten it "
            "or raise the limit (--max-question-chars / TYPEDRAG_MAX_QUESTION_CHARS)"
        )
    return text

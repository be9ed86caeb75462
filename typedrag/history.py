"""A conversation's earlier turns, as every surface hands them to the pipeline.

Chat clients send the whole conversation: system messages (how to write: language, tone, length),
then user and assistant turns. The pipeline answers the last question; the earlier turns say what it
is about (a follow-up like "and why?" needs them) and the system messages how to write the answer.
History is user data like the question: cleaned the same way, and bounded, so a long conversation
costs a bounded prompt and a bounded rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from typedrag.errors import QuestionError
from typedrag.questions import clean_question

MAX_TURNS = 20  # the latest user and assistant turns kept; older ones rarely name what a follow-up means
MAX_TURN_CHARS = 4000  # of each turn (an assistant's long answer is cut, not refused)
MAX_INSTRUCTION_CHARS = 2000  # of all system messages together


class Turn(BaseModel):
    """One message of a conversation: who said it and what."""

    role: Literal["user", "assistant", "system"]
    content: str


def clean_history(history: Iterable[Turn | Mapping[str, Any]] | None) -> list[Turn]:
    """The turns with their text cleaned like a question's and cut to their bounds; QuestionError names a
    turn that is not a message (`{"role": "user" | "assistant" | "system", "content": "..."}`).

    Empty turns are left out (a client's placeholder); of user and assistant turns the latest `MAX_TURNS` are kept.
    """
    turns: list[Turn] = []
    for number, item in enumerate(history or [], 1):
        try:
            turn = item if isinstance(item, Turn) else Turn.model_validate(dict(item))
        except (ValidationError, TypeError, ValueError) as error:
            raise QuestionError(
                f"history turn {number} is not a message {{'role': 'user' | 'assistant' | 'system', 'content': text}}: {_first_problem(error)}"
            ) from None
        try:
            text = clean_question(turn.content, max_chars=10**9)[:MAX_TURN_CHARS]
        except QuestionError:
            continue  # empty once cleaned: nothing said
        turns.append(Turn(role=turn.role, content=text))
    dialogue = [t for t in turns if t.role != "system"][-MAX_TURNS:]
    kept = {id(t) for t in dialogue}
    return [t for t in turns if t.role == "system" or id(t) in kept]


def _first_problem(error: Exception) -> str:
    if isinstance(error, ValidationError):
        problem = error.errors()[0]
        return f"{'.'.join(str(p) for p in problem['loc']) or 'value'}: {problem['msg']}"
    return str(error)


def instructions_of(history: list[Turn]) -> str:
    """What the system messages ask of the answer, one paragraph each ("" when there are none)."""
    text = "\n".join(t.content for t in history if t.role == "system")
    return text[:MAX_INSTRUCTION_CHARS]


def dialogue_of(history: list[Turn]) -> list[Turn]:
    """The user and assistant turns, in order."""
    return [t for t in history if t.role != "system"]

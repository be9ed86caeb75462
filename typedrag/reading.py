"""Reading a question in its conversation, as a flow of steps the driver performs (typedrag.steps) before the
question is routed: a follow-up ("and why did it fall?") is read to stand alone, by the engine's model when
there is one (`RewriteFollowUp`), else, or when the model's rewrite fails (recorded), from the conversation's
own words (`ReadFollowUp`, typedrag.followup). A question with no earlier question is read as asked."""

from __future__ import annotations

from collections.abc import Sequence

from typedrag.engines.base import PlanTask
from typedrag.errors import LLMError, PlanFailed
from typedrag.followup import Standalone, StandaloneQuestion, conversation_text
from typedrag.history import Turn
from typedrag.prompts import REWRITE_QUESTION
from typedrag.result import Rewrite
from typedrag.steps import Flow, Note, ReadFollowUp, RewriteFollowUp

__all__ = ["reading"]


def reading(question: str, dialogue: Sequence[Turn], max_chars: int) -> Flow[tuple[Standalone, Rewrite | None]]:
    """`question` as it stands alone after `dialogue` (the conversation's turns before it), and how it was read
    (None without earlier questions)."""
    if not any(turn.role == "user" for turn in dialogue):
        return Standalone(question=question, searches=(question,)), None
    task = PlanTask(
        role="rewrite",
        prompt=REWRITE_QUESTION.filled(conversation=conversation_text(dialogue)),
        schema=StandaloneQuestion,
    )
    try:
        rewritten = yield RewriteFollowUp(task, question, len(dialogue))
    except (PlanFailed, LLMError) as error:
        yield Note(
            "rewrite",
            f"{type(error).__name__}: {error}; the follow-up was read offline from the conversation's own words",
        )
        rewritten = None
    if rewritten is not None:
        changed = rewritten.question.casefold() != question.casefold()
        asked = rewritten.question if changed else question
        return Standalone(question=asked, searches=(asked,), rewritten=changed), Rewrite(
            by=rewritten.by, rewritten=changed, history_turns=len(dialogue)
        )
    # the index is asked whether the follow-up leans on the conversation
    standalone = yield ReadFollowUp(question, tuple(dialogue), max_chars)
    return standalone, Rewrite(
        by="offline", rewritten=standalone.rewritten, carried=list(standalone.carried), history_turns=len(dialogue)
    )

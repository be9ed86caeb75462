"""Question input through the Pipeline and through `typedrag ask`: a clear error or correct handling."""

from __future__ import annotations

import json
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrag.engines.offline import OfflineEngine
from typedrag.nfq import NFQType
from typedrag.pipeline import Pipeline
from typedrag.questions import QuestionError, clean_question
from typedrag.testing.openai_stub import OpenAIStubServer

from .conftest import assert_clean_failure, run_cli, stub_pipeline

KOREAN = unicodedata.normalize("NFD", "로마 제국은 왜 멸망했나요?")  # decomposed jamo, as some input methods send it
ARABIC = "لماذا سقط الإمبراطورية الرومانية؟"
EMOJI = "Why did Rome 🏛️ fall? 🤔👨‍👩‍👧"


def has_control(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("", "the question is empty"),
        (" \t\n\u3000 ", "the question is empty"),
        ("\x00\x1b\x7f\x9b", "the question is empty"),
        ("why " * 600, "over the limit of 2000"),
    ],
    ids=["empty", "whitespace", "only-control", "too-long"],
)
async def test_unanswerable_questions_are_refused_before_any_work(retriever, question, message):
    with pytest.raises(QuestionError, match=message):
        await Pipeline(OfflineEngine(), retriever).answer(question, "typed", NFQType.REASON)


@pytest.mark.parametrize(
    ("question", "cleaned"),
    [
        ("Why did\x00 Rome\x1b[2J fall?\x07", "Why did Rome [2J fall?"),
        (
            "Why did\x9b31m Rome\x85fall?",
            "Why did 31m Rome fall?",
        ),  # C1 controls: \x9b is an 8-bit escape, \x85 a newline
        ("Why did Rome fall \udcff\udcfe?", "Why did Rome fall \ufffd\ufffd?"),  # undecodable bytes (surrogateescape)
        (KOREAN, unicodedata.normalize("NFC", KOREAN)),
        (ARABIC, ARABIC),
        (EMOJI, EMOJI),
    ],
    ids=["c0", "c1", "surrogates", "korean", "arabic", "emoji"],
)
async def test_odd_but_answerable_questions_are_cleaned_and_answered_by_both_engines(retriever, question, cleaned):
    with OpenAIStubServer() as server:
        for pipeline in (Pipeline(OfflineEngine(), retriever), stub_pipeline(server.base_url, retriever)):
            result = await pipeline.answer(question, "typed", NFQType.REASON)
            assert result.question == cleaned and not has_control(result.question)
            # what the offline reader finds nothing for is left out and recorded (an aspect, a cause, all aspects
            # at once, a lead of the nearest sentences); nothing else falls back
            expected = ("left out:", "AspectsFailed: all", "the reader found")
            assert (
                result.answer.strip()
                and [
                    f
                    for f in result.fallbacks
                    if not f.step.startswith("aspect:") and not f.reason.startswith(expected)
                ]
                == []
            )
            json.loads(result.model_dump_json())
    assert all(cleaned in r.prompt for r in server.requests if r.schema_name)  # the model saw the cleaned question


@settings(deadline=None)
@given(st.text())
def test_clean_question_is_total_and_idempotent(text):
    try:
        cleaned = clean_question(text)
    except QuestionError:
        return
    assert cleaned and len(cleaned) <= 2000 and not has_control(cleaned)
    assert cleaned == cleaned.strip() and "  " not in cleaned
    cleaned.encode("utf-8")
    assert clean_question(cleaned) == cleaned


# --- the CLI ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "message"),
    [("", "the question is empty"), ("   \t ", "the question is empty"), ("why " * 600, "over the limit of 2000")],
    ids=["empty", "whitespace", "too-long"],
)
def test_cli_refuses_unanswerable_questions_with_exit_2(small_index, question, message):
    assert_clean_failure(run_cli("ask", question, "--index", str(small_index)), message)


@pytest.mark.parametrize(
    ("argument", "cleaned"),
    [
        ("Why did\x1b[31m Rome fall?\x07", "Why did [31m Rome fall?"),
        (b"Why did Rome fall \xff?", "Why did Rome fall \ufffd?"),  # not UTF-8: argv arrives with surrogates
        (KOREAN, unicodedata.normalize("NFC", KOREAN)),
        (ARABIC, ARABIC),
        (EMOJI, EMOJI),
    ],
    ids=["escapes", "invalid-utf8", "korean", "arabic", "emoji"],
)
def test_cli_answers_odd_questions(small_index, argument, cleaned):
    if isinstance(argument, bytes) and sys.platform == "win32":
        pytest.skip("argv is text on Windows")
    proc = run_cli("ask", argument, "--index", str(small_index), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["question"] == cleaned and result["answer"].strip()


def test_cli_shows_questions_containing_markup_verbatim(small_index):
    proc = run_cli("ask", "Why do [bold] and [/x] look odd?", "--index", str(small_index), "--type", "reason")
    assert proc.returncode == 0, proc.stderr
    assert "Why do [bold] and [/x] look odd?" in proc.stdout

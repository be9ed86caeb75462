"""Issue 33: conversations (a follow-up read with the turns before it, system messages as instructions) and an
honest "the documents don't say" (abstention), offline and on the LLM path against the loopback OpenAI stub."""

from __future__ import annotations

import json
import re

import pytest

from typedrag import Conversation, ListRetriever, OfflineEngine, Pipeline
from typedrag.abstain import HoldBack, said_not_in_sources
from typedrag.engines.llm_engine import LLMEngine
from typedrag.errors import PlanFailed, QuestionError
from typedrag.followup import CARRIED_TERMS, MAX_TERM_CHARS, Standalone, leans_on_history, offline_standalone
from typedrag.history import MAX_TURNS, Turn, clean_history
from typedrag.llm.base import StructuredOutcome
from typedrag.llm.cache import ResponseCache
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.pipeline import PipelineSettings
from typedrag.prompts import PROMPT_VERSION
from typedrag.questions import DEFAULT_MAX_CHARS
from typedrag.reading import reading
from typedrag.records import Passage
from typedrag.steps import ReadFollowUp, RewriteFollowUp, Rewritten
from typedrag.testing.flows import play
from typedrag.testing.openai_stub import Reply, default_content

SHIPS = [
    "The Lusitania carried lifeboats, and more lifeboats were added after 1912, enough for all on board.",
    "RMS Titanic was a British ocean liner; she carried twenty lifeboats, too few for everyone on board.",
    "An iceberg is a large piece of fresh-water ice that has broken off a glacier and floats in open water.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen in the chloroplasts of plants.",
]
FIRST, FOLLOW_UP = "Tell me about the Titanic ocean liner.", "How many lifeboats did it carry?"
HISTORY = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "It was a British ocean liner [2]."}]
REWRITTEN = "How many lifeboats did the Titanic carry?"


def offline() -> Pipeline:
    return Pipeline(OfflineEngine(), ListRetriever(SHIPS))


def stub_pipeline(server, **model) -> Pipeline:
    """Without query expansion: these tests read the rewrite and answer calls."""
    chat = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=20, **model)
    return Pipeline(LLMEngine(chat), ListRetriever(SHIPS), settings=PipelineSettings(expand_queries=False))


def rewriting(rewrite: str = REWRITTEN, answer=None):
    """A stub responder: the rewrite step gets `rewrite`, writing steps `answer(request)` (default: the stub's)."""

    def responder(request):
        if request.schema_name == "StandaloneQuestion":
            return Reply(content=json.dumps({"question": rewrite}))
        if answer is not None and request.schema_name is None:
            return Reply(content=answer(request))
        return Reply(content=default_content(request))

    return responder


# ---------------------------------------------------------------- offline: the conversation's own words


async def test_a_follow_up_is_read_with_the_earlier_question_and_finds_its_passage():
    events = []
    result = await offline().answer(
        FOLLOW_UP, "rag", history=HISTORY, on_event=lambda name, data: events.append((name, data))
    )
    assert result.question == FOLLOW_UP and "Titanic" in result.standalone_question
    assert result.rewrite.by == "offline" and result.rewrite.rewritten and result.rewrite.history_turns == 2
    assert len(result.searched) == 2 and result.searched[1] == FOLLOW_UP  # with the carried terms, and as asked: fused
    assert "twenty lifeboats" in result.sources[0].text
    rewrite = next(data for name, data in events if name == "rewrite")
    assert rewrite["standalone_question"] == result.standalone_question and events[0][0] == "rewrite"
    alone = await offline().answer(FOLLOW_UP, "rag")
    assert "Lusitania" in alone.sources[0].text  # the same question without the conversation


async def test_a_follow_up_that_stands_alone_is_not_rewritten_and_a_question_without_history_is_as_before():
    result = await offline().answer("How does photosynthesis turn light into sugar?", "rag", history=HISTORY)
    assert result.rewrite is not None and not result.rewrite.rewritten
    assert result.standalone_question == result.question and result.searched == [result.question]
    plain = await offline().answer("How does photosynthesis turn light into sugar?", "rag")
    assert plain.rewrite is None and plain.standalone_question is None and plain.searched == [plain.question]
    assert [s.role for s in plain.steps] == [s.role for s in result.steps] == ["answer:rag"]  # no extra step


@pytest.mark.parametrize(
    ("question", "leans"),
    [
        ("And why?", True),
        ("What about the other one?", True),
        ("How did it sink?", True),
        ("Which of the two is older?", True),
        ("How does photosynthesis turn light into sugar?", False),
        ("Why did the Western Roman Empire fall?", False),
    ],
)
def test_what_points_back_at_the_conversation(question, leans):
    assert leans_on_history(question) is leans


def test_words_that_say_what_is_asked_are_not_carried_in():
    dialogue = [Turn(role="user", content="What is the difference between a comet and an asteroid?")]
    standalone = offline_standalone("Which of the two is more likely to hit Earth?", dialogue)
    assert standalone.carried == ("comet", "asteroid") and "difference" not in standalone.question


# A small encyclopedia for follow-ups that change the subject or lean on it without a pronoun (issue 41 #4).
SKY = [
    Passage(
        "comet#0",
        "comet",
        "Comet",
        "A comet is an icy, small Solar System body that warms and releases gases near the Sun, "
        "showing a visible coma and often a tail.",
    ),
    Passage(
        "asteroid#0",
        "asteroid",
        "Asteroid",
        "An asteroid is a minor planet, a rocky or metallic body of the inner Solar System that shows no coma.",
    ),
    Passage(
        "impact#0",
        "impact",
        "Impact event",
        "An impact event is a collision between astronomical objects; asteroids hit "
        "the Earth far more often than comets do.",
    ),
    Passage(
        "dinosaur#0",
        "dinosaur",
        "Dinosaur",
        "Dinosaurs died out 66 million years ago: the non-avian dinosaurs became "
        "extinct in the Cretaceous–Paleogene extinction event, after the impact of a large asteroid at Chicxulub.",
    ),
    Passage(
        "rome#0",
        "rome",
        "Fall of the Western Roman Empire",
        "The Western Roman Empire fell in 476, when Odoacer deposed "
        "Romulus Augustulus; invasions, civil wars and a weakened economy had eroded central control.",
    ),
    Passage(
        "byzantium#0",
        "byzantium",
        "Byzantine Empire",
        "The Eastern Roman Empire, the eastern half of the Roman Empire, "
        "lasted until the fall of Constantinople to the Ottomans in 1453.",
    ),
    Passage(
        "kangxi#0",
        "kangxi",
        "Kangxi Emperor",
        "The Kangxi Emperor, third of the Qing dynasty, is one of the longest-reigning emperors in history.",
    ),
    Passage(
        "japan#0",
        "japan",
        "Emperor of Japan",
        "The Emperor of Japan is the monarch and head of the Imperial Family; emperors are named after their era.",
    ),
    Passage(
        "zambezi#0", "zambezi", "Zambezi", "The Zambezi is a river whose eastern half falls over the Victoria Falls."
    ),
    Passage(
        "langs#0",
        "langs",
        "Programming languages",
        "In performance benchmarks C++ and Rust are usually fastest, Go and Java "
        "follow, and Python is the slowest of the five.",
    ),
]


def asked(*questions: str) -> list[dict]:
    """A conversation of these user questions, each with a placeholder answer."""
    return [
        turn
        for q in questions
        for turn in ({"role": "user", "content": q}, {"role": "assistant", "content": "(an answer)"})
    ]


async def test_a_follow_up_on_a_new_subject_is_left_alone_and_carries_nothing():
    """Issue 41 #4: after a comet/asteroid exchange, "Why did the dinosaurs die out?" was searched with "hit Earth,
    two, likely, comet, asteroid"; it names its own subject, and the index finds it without the conversation."""
    history = asked(
        "What is the difference between a comet and an asteroid?", "Which of the two is more likely to hit Earth?"
    )
    result = await Pipeline(OfflineEngine(), ListRetriever(SKY)).answer(
        "Why did the dinosaurs die out?", "rag", history=history
    )
    assert not result.rewrite.rewritten and result.rewrite.carried == []
    assert result.standalone_question == result.question and result.searched == [result.question]
    assert result.sources[0].passage_id == "dinosaur#0"


@pytest.mark.parametrize(
    ("follow_up", "answering"),
    [("When did the eastern half fall?", "byzantium#0"), ("Which emperors were involved?", "rome#0")],
)
async def test_a_follow_up_that_leans_without_a_pronoun_carries_the_subject(follow_up, answering):
    """Issue 41 #4: after "Why did the Western Roman Empire fall?" these were searched as if alone (an abstention;
    the Kangxi Emperor). No word points back, but what the index finds with the subject comes far closer."""
    history = asked("Why did the Western Roman Empire fall?")
    result = await Pipeline(OfflineEngine(), ListRetriever(SKY)).answer(follow_up, "rag", history=history)
    assert result.rewrite.rewritten and "Western Roman Empire" in " ".join(result.rewrite.carried)
    alone = await Pipeline(OfflineEngine(), ListRetriever(SKY)).answer(follow_up, "rag")
    assert alone.sources[0].passage_id in ("kangxi#0", "japan#0", "zambezi#0")  # what its own words find first

    def rank(answer) -> int:
        found = [s.passage_id for s in answer.sources]
        return found.index(answering) if answering in found else len(SKY)

    assert rank(result) < rank(alone)  # the answering passage comes up with the subject


def test_the_subject_is_carried_from_the_question_before_not_an_older_one_and_without_function_words():
    """Issue 41 #4: in `typedrag chat` turn 4 carried turn 2's terms, not turn 3's; and "two", "likely" were
    carried as if they named a subject. Each question is read as it was: after a change of subject, the new one."""
    retriever = ListRetriever(SKY)
    comets = asked("What is the difference between a comet and an asteroid?")
    second = offline_standalone("Which of the two is more likely to hit Earth?", [Turn(**t) for t in comets], retriever)
    assert set(second.carried) == {"comet", "asteroid"}
    turns = [
        Turn(**t)
        for t in asked(
            "What is the difference between a comet and an asteroid?",
            "Which of the two is more likely to hit Earth?",
            "Why did the dinosaurs die out?",
        )
    ]
    fourth = offline_standalone("When did that happen?", turns, retriever)
    carried = " ".join(fourth.carried).split()
    assert "dinosaurs" in carried and not {"comet", "asteroid", "two", "likely"} & set(carried)


async def test_the_conversation_object_reads_turn_four_with_turn_three():
    chat = Conversation(Pipeline(OfflineEngine(), ListRetriever(SKY)), method="rag")
    for question in (
        "What is the difference between a comet and an asteroid?",
        "Which of the two is more likely to hit Earth?",
        "Why did the dinosaurs die out?",
    ):
        await chat.ask(question)
    fourth = await chat.ask("When did that happen?")
    carried = set(" ".join(fourth.rewrite.carried).split())
    assert (
        "dinosaurs" in carried and not {"comet", "asteroid", "hit", "Earth", "two", "likely"} & carried
    )  # turn 3's subject only


def test_a_long_run_of_content_words_is_carried_up_to_the_limit_not_dropped():
    """Issue 42 #10: "Compare Python Java Rust Go C++ performance benchmarks" (7 content words in a row, over the
    6 carried at most) left "And which is fastest?" with nothing carried; it abstained."""
    turns = [Turn(**t) for t in asked("Compare Python Java Rust Go C++ performance benchmarks")]
    standalone = offline_standalone("And which is fastest?", turns, ListRetriever(SKY))
    words = " ".join(standalone.carried).split()
    assert standalone.rewritten and 3 <= len(words) <= CARRIED_TERMS and {"Rust", "Java"} & set(words)


async def test_a_follow_ups_carried_terms_keep_the_question_within_its_limit():
    """Issue 42 #9: carried terms had no length limit: 6 "words" of 2,000 characters made the question answered
    14,003 characters long against the 2,000 limit. Blobs are never carried, and the question as read stays
    within the limit the pipeline was given."""
    blob = "x" * 1990
    earlier = asked(" ".join([f"{blob}{i}" for i in range(1)]), f"Why did the Western Roman Empire {blob}?")
    result = await Pipeline(OfflineEngine(), ListRetriever(SKY)).answer("And why?", "rag", history=earlier)
    assert len(result.standalone_question) <= DEFAULT_MAX_CHARS and blob not in result.standalone_question
    assert all(len(word) <= MAX_TERM_CHARS for term in result.rewrite.carried for word in term.split())
    near_limit = "Why " + "did the western empire fall " * 70  # about 1,950 characters of its own
    tight = Pipeline(
        OfflineEngine(), ListRetriever(SKY), settings=PipelineSettings(max_question_chars=len(near_limit) + 10)
    )
    result = await tight.answer(near_limit, "rag", history=asked("Tell me about Byzantium and Constantinople"))
    assert len(result.standalone_question) <= len(near_limit) + 10


def test_history_is_checked_and_bounded():
    with pytest.raises(QuestionError, match="history turn 2 is not a message"):
        clean_history([{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}])
    turns = clean_history(
        [{"role": "system", "content": "Be brief."}] + [{"role": "user", "content": f"q{i}"} for i in range(30)]
    )
    assert turns[0].role == "system" and len(turns) == 1 + MAX_TURNS and turns[-1].content == "q29"
    assert clean_history([{"role": "user", "content": " \x00 "}]) == []  # an empty turn says nothing


async def test_offline_a_system_message_is_recorded_as_not_followed():
    result = await offline().answer(
        FOLLOW_UP, "rag", history=[{"role": "system", "content": "Answer in French."}, *HISTORY]
    )
    assert result.instructions == "Answer in French."
    assert any(f.step == "instructions" and "cannot follow" in f.reason for f in result.fallbacks)


async def test_the_conversation_object_keeps_the_history_and_starts_over():
    chat = Conversation(offline(), method="rag", system="Be brief.")
    await chat.ask(FIRST)
    answer = await chat.ask(FOLLOW_UP)
    assert "Titanic" in answer.standalone_question and [t.role for t in chat.history] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    chat.reset()
    assert [t.role for t in chat.history] == ["system"] and chat.last is None
    assert (await chat.ask(FOLLOW_UP)).rewrite is None  # no earlier question after a reset


# ---------------------------------------------------------------- offline abstention: the relevance bar


async def test_a_question_no_passage_answers_abstains_and_keeps_the_nearest_passages():
    events = []
    result = await offline().answer(
        "Which band played music on deck of the Titanic?", on_event=lambda name, data: events.append(name)
    )
    assert (
        result.abstained and result.abstention.by == "relevance bar" and result.abstention.score < result.abstention.bar
    )
    assert result.answer.startswith("The documents do not answer this.") and "Which band played music" in result.answer
    assert result.sources and result.citations == []  # the nearest passages, never cited as if they answered
    assert "abstained" in events and "token" in events  # a streaming client hears it and reads the text
    answered = await offline().answer("How many lifeboats did the Titanic carry?")
    assert not answered.abstained and answered.citations
    kept = await Pipeline(
        OfflineEngine(), ListRetriever(SHIPS), settings=PipelineSettings(abstain_offline=False)
    ).answer("Which band played music on deck of the Titanic?")
    assert not kept.abstained and not kept.answer.startswith(
        "The documents do not answer this."
    )  # the bar can be switched off


async def test_past_the_bar_the_reader_abstains_when_it_reads_no_sentence_as_an_answer():
    """Issue 33: offline abstention from the reader model's scores. The passages pass the relevance bar (they
    are about lifeboats), but a reader that reads nothing as answering makes the answer abstain, by "reader",
    for plain RAG and a typed plan alike; a reader that finds an answer, or abstention switched off, answers."""
    from typedrag.abstain import READER_BAR
    from typedrag.reader import Reading, Role
    from typedrag.testing import ScriptedReader

    unread = ScriptedReader(lambda q, title, s: Reading(READER_BAR / 2, 0.9, Role.FACT))
    question = "How many lifeboats did the Titanic carry?"
    for method in ("rag", "typed"):
        events = []
        result = await Pipeline(OfflineEngine(unread), ListRetriever(SHIPS)).answer(
            question, method, on_event=lambda name, data: events.append(name)
        )
        assert (
            result.abstained
            and result.abstention.by == "reader"
            and result.abstention.score < result.abstention.bar == READER_BAR
        )
        assert (
            result.answer.startswith("The documents do not answer this.") and result.citations == [] and result.sources
        )
        assert "abstained" in events and "token" in events
    read = ScriptedReader(
        lambda q, title, s: Reading(0.9, 0.9, Role.FACT) if "twenty lifeboats" in s else Reading(0.0, 0.0, Role.NONE)
    )
    answered = await Pipeline(OfflineEngine(read), ListRetriever(SHIPS)).answer(question, "rag")
    assert not answered.abstained and "twenty lifeboats" in answered.answer
    kept = await Pipeline(
        OfflineEngine(unread), ListRetriever(SHIPS), settings=PipelineSettings(abstain_offline=False)
    ).answer(question, "rag")
    assert not kept.abstained


async def test_a_misrouted_typed_question_keeps_its_retrieval_when_it_abstains():
    result = await offline().answer("Which band played music on deck of the Titanic?", "typed", "reason")
    assert result.abstained and result.sources and result.type.type == "REASON" and not result.plan_used


# ---------------------------------------------------------------- the LLM path, on the loopback stub


async def test_the_rewrite_step_is_a_validated_cached_call_in_the_trace_and_its_question_is_answered(stub, tmp_path):
    server = stub(rewriting())
    cache = ResponseCache(tmp_path, namespace=PROMPT_VERSION)
    result = await stub_pipeline(server, cache=cache).answer(FOLLOW_UP, "rag", history=HISTORY)
    rewrite_requests = [r for r in server.requests if r.schema_name == "StandaloneQuestion"]
    assert len(rewrite_requests) == 1
    prompt = rewrite_requests[0].last_user
    assert (
        FIRST in prompt
        and "assistant: It was a British ocean liner [2]." in prompt
        and f"Last question: {FOLLOW_UP}" in prompt
    )
    call = result.llm_calls[0]
    assert call.role == "rewrite" and call.structured is StructuredOutcome.OK and not call.cached
    assert result.standalone_question == REWRITTEN and result.searched == [REWRITTEN]
    assert result.rewrite.by.startswith("openai-compatible:stub") and result.rewrite.rewritten
    answer_request = next(r for r in server.requests if r.schema_name is None)
    assert f"Question: {REWRITTEN}" in answer_request.last_user and "twenty lifeboats" in answer_request.last_user
    again = await stub_pipeline(server, cache=cache).answer(FOLLOW_UP, "rag", history=HISTORY)
    assert again.llm_calls[0].role == "rewrite" and again.llm_calls[0].cached  # cached like every call


async def test_without_history_there_is_no_rewrite_call_and_a_follow_up_the_model_keeps_is_not_rewritten(stub):
    server = stub(rewriting(rewrite="how many lifeboats did it carry?"))
    plain = await stub_pipeline(server).answer(FOLLOW_UP, "rag")
    assert [c.role for c in plain.llm_calls] == ["answer:rag"] and plain.rewrite is None
    kept = await stub_pipeline(server).answer(FOLLOW_UP, "rag", history=HISTORY)
    assert not kept.rewrite.rewritten and kept.standalone_question == FOLLOW_UP


async def test_a_rewrite_that_never_validates_falls_back_to_the_offline_reading_recorded(stub):
    def responder(request):
        if request.schema_name == "StandaloneQuestion":
            return Reply(content='{"question": ""}')  # invalid twice: the repair round too
        return Reply(content=default_content(request))

    server = stub(responder)
    result = await stub_pipeline(server).answer(FOLLOW_UP, "rag", history=HISTORY)
    assert result.llm_calls[0].structured is StructuredOutcome.FAILED
    assert result.rewrite.by == "offline" and "Titanic" in result.standalone_question
    assert any(f.step == "rewrite" and "offline" in f.reason for f in result.fallbacks)


async def test_a_system_message_reaches_every_writing_prompt_and_no_plan_prompt(stub):
    history = [{"role": "system", "content": "Answer in French, in two sentences."}, *HISTORY]
    server = stub(rewriting())
    result = await stub_pipeline(server).answer(FOLLOW_UP, "typed", "reason", history=history)
    writes = [r for r in server.requests if r.schema_name is None]
    plans = [r for r in server.requests if r.schema_name is not None]
    assert len(writes) >= 2 and plans  # the overview, the aspects and the aggregator; the rewrite and the plan
    for request in writes:
        system = request.messages[0]["content"]
        assert system.endswith("Answer in French, in two sentences.") and "reader gave these instructions" in system
    assert not any("Answer in French" in m["content"] for r in plans for m in r.messages)
    assert result.instructions == "Answer in French, in two sentences." and not any(
        f.step == "instructions" for f in result.fallbacks
    )


async def test_the_models_not_in_the_sources_reply_is_an_abstention_never_streamed_as_text(stub):
    said = '{"not_in_sources": "which band played"}'
    server = stub(rewriting(answer=lambda request: said), token_rate=200)
    tokens = []
    result = await stub_pipeline(server).answer(
        "Which band played music on deck of the Titanic?",
        "rag",
        on_event=lambda name, data: name == "token" and tokens.append(data["text"]),
    )
    assert result.abstained and result.abstention.by.startswith("openai-compatible:stub")
    assert "which band played" in result.abstention.reason
    assert result.answer.startswith("The documents do not answer this.") and result.sources and result.citations == []
    assert "".join(tokens) == result.answer and "not_in_sources" not in "".join(tokens)


async def test_prose_that_says_the_sources_lack_something_is_an_answer_not_an_abstention(stub):
    prose = "The sources do not name the band; they only say she carried twenty lifeboats [2]."
    server = stub(rewriting(answer=lambda request: prose))
    result = await stub_pipeline(server).answer("Which band played music on deck of the Titanic?", "rag")
    assert not result.abstained and result.answer.startswith("The sources do not name the band")


async def test_an_aspect_the_model_says_its_passages_do_not_answer_is_dropped_and_recorded(stub):
    def answer(request):
        if (
            "Answer only this part of it" in request.last_user
            and "lifeboats" in request.last_user.split("Answer only this part of it")[1]
        ):
            return '{"not_in_sources": "how many lifeboats"}'
        numbers = re.findall(r"\[(\d+)\]", request.last_user)
        return f"The Titanic struck an iceberg [{numbers[0] if numbers else 1}]."

    def responder(request):
        if request.schema_name == "SubQueryPlan":
            return Reply(content=json.dumps({"sub_queries": ["Titanic lifeboats", "iceberg collision"]}))
        return (
            Reply(content=answer(request)) if request.schema_name is None else Reply(content=default_content(request))
        )

    server = stub(responder)
    result = await stub_pipeline(server).answer("Why did the Titanic sink?", "typed", "reason")
    dropped = [a for a in result.aspects if a.label == "Titanic lifeboats"]
    assert dropped and "do not answer it: how many lifeboats" in dropped[0].error
    assert any(f.step == "aspect:Titanic lifeboats" for f in result.fallbacks)
    assert not result.abstained and result.strategy == "reason"


@pytest.mark.parametrize(
    ("reply", "missing"),
    [
        ('{"not_in_sources": "the score"}', "the score"),
        ('```json\n{"not_in_sources": "x"}\n```', "x"),
        ('{"not_in_sources": "x", "answer": "y"}', None),
        ('{"answer": "the score"}', None),
        ('The JSON {"not_in_sources": "x"} is what a model says.', None),
        # issue 42: a whole reply that only says the sources lack the answer is the signal in prose
        ("Not in the sources.", "Not in the sources."),
        ('{"not_in_sources": null}', "the sources do not answer the question"),
    ],
)
def test_only_the_whole_reply_as_the_signal_is_the_signal(reply, missing):
    assert said_not_in_sources(reply) == missing


def test_a_signal_object_longer_than_its_bound_is_still_the_signal_never_the_answer():
    """Qwen2.5-0.5B put passage text inside the object (over 400 characters): it failed validation and was shown to
    the user as the answer, raw JSON. It is the signal, its text kept to the bound, and never streamed."""
    lack = "the passages only say: " + "Smoking is banned in many public places in several countries. " * 10
    reply = json.dumps({"not_in_sources": lack})
    said = said_not_in_sources(reply)
    assert said is not None and said.startswith("the passages only say: Smoking") and len(said) <= 400
    assert said_not_in_sources("```json\n" + reply + "\n```") == said
    heard: list[str] = []
    held = HoldBack(heard.append)
    for start in range(0, len(reply), 37):
        held(reply[start : start + 37])
    assert heard == []  # still held: the engine drops it once the whole reply reads as the signal


def test_a_streamed_reply_is_held_back_only_while_it_could_be_the_signal():
    heard: list[str] = []
    held = HoldBack(heard.append)
    for piece in ['{"not_in', '_sources": "x"}']:
        held(piece)
    assert heard == []  # never released: the caller recognises the signal instead
    answer = HoldBack(heard.append)
    for piece in ["The Titanic ", "sank [1]."]:
        answer(piece)
    assert heard == ["The Titanic ", "sank [1]."]
    heard.clear()
    code = HoldBack(heard.append)
    code("{a: 1} is a dict literal")
    assert heard == []  # it opens like the signal: held until the reply ends (or runs past the signal's length)
    code.release()
    assert heard == ["{a: 1} is a dict literal"]


# ---------------------------------------------------------------- the service and the terminal

fastapi = pytest.importorskip("fastapi", reason="fastapi and uvicorn are dependencies of typedrag: pip install -e .")

from test_server import serving  # noqa: E402  (tests/ is on sys.path, as for conftest)

from typedrag.config import Settings  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402


@pytest.fixture(scope="module")
def ships_url(small_index):
    with serving(create_app(Settings(index=small_index, cache_dir=None), offline())) as url:
        yield url


def test_the_openai_endpoint_reads_the_whole_conversation(ships_url):
    import openai

    client = openai.OpenAI(base_url=f"{ships_url}/v1", api_key="unused", max_retries=0)
    messages = [{"role": "system", "content": "Answer in French."}, *HISTORY, {"role": "user", "content": FOLLOW_UP}]
    result = client.chat.completions.create(model="typedrag-rag", messages=messages).model_extra["typedrag"]
    assert (
        result["question"] == FOLLOW_UP
        and "Titanic" in result["standalone_question"]
        and result["instructions"] == "Answer in French."
    )
    assert "twenty lifeboats" in result["sources"][0]["text"] and result["rewrite"]["history_turns"] == 2
    alone = client.chat.completions.create(model="typedrag-rag", messages=messages[-1:]).model_extra["typedrag"]
    assert alone["standalone_question"] is None and "Lusitania" in alone["sources"][0]["text"]


def test_an_abstaining_answer_says_so_in_the_text_and_the_typedrag_field_streamed_or_not(ships_url):
    import openai

    client = openai.OpenAI(base_url=f"{ships_url}/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "Which band played music on deck of the Titanic?"}]
    completion = client.chat.completions.create(model="typedrag-rag", messages=messages)
    text, result = completion.choices[0].message.content, completion.model_extra["typedrag"]
    assert result["abstained"] and result["abstention"]["by"] == "relevance bar"
    assert (
        text.startswith("The documents do not answer this.")
        and "Nearest passages, not an answer:" in text
        and "Sources:" not in text
    )
    chunks = list(client.chat.completions.create(model="typedrag-rag", messages=messages, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").model_extra["typedrag"]
    assert streamed == text and final["abstained"]
    assert any((c.model_extra.get("typedrag_event") or {}).get("event") == "abstained" for c in chunks)


def test_the_native_api_and_its_stream_take_history_and_refuse_a_turn_that_is_not_a_message(ships_url):
    import httpx

    body = {"question": FOLLOW_UP, "method": "rag", "history": HISTORY}
    result = httpx.post(f"{ships_url}/v1/answer", json=body, timeout=60).json()
    assert "Titanic" in result["standalone_question"] and "twenty lifeboats" in result["sources"][0]["text"]
    with httpx.stream("POST", f"{ships_url}/v1/answer/stream", json=body, timeout=60) as response:
        names = [line.removeprefix("event: ") for line in response.iter_lines() if line.startswith("event: ")]
    assert names[0] == "rewrite" and names[-1] == "result"
    bad = httpx.post(f"{ships_url}/v1/answer", json={**body, "history": [{"role": "user"}]}, timeout=60)
    assert bad.status_code == 422 and "content" in bad.json()["error"]["message"]
    openai_bad = httpx.post(
        f"{ships_url}/v1/chat/completions",
        json={"model": "typedrag-rag", "messages": [{"role": "assistant", "content": "hi"}]},
    )
    assert openai_bad.status_code == 400 and "no user message" in openai_bad.json()["error"]["message"]


def test_typedrag_chat_holds_a_conversation_on_stdin(small_index, tmp_path):
    import os
    import subprocess
    import sys

    lines = [
        "What is the difference between a crocodile and an alligator?",
        "Which of the two lives in fresh water?",
        "/trace",
        "/reset",
        "Which of the two lives in fresh water?",
        "/trace",
        "/nonsense",
    ]
    env = {**os.environ, "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "400"}
    done = subprocess.run(
        [sys.executable, "-m", "typedrag.cli", "chat", "--index", str(small_index), "--method", "rag"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    first_trace, second_trace = out.split("conversation cleared")
    assert "conversation: 2 earlier turns; rewritten by offline" in first_trace
    read_as = first_trace.split("read as: Which of the two lives in fresh water? (", 1)[1].split(")", 1)[0]
    assert sorted(read_as.split(", ")) == ["alligator", "crocodile"]
    assert "conversation:" not in second_trace  # after /reset the same follow-up has no conversation to read it with
    assert (
        "unknown command /nonsense" in out
        and out.count("\nSources\n") + out.count("\nNearest passages, not an answer\n") == 3
    )


@pytest.mark.parametrize(
    ("question", "judged"),
    [
        ("Why did Rome fall?", True),
        ("Why did Rome 🏛️ fall? 🤔", True),
        ("로마 제국은 왜 멸망했나요?", False),
        ("لماذا سقطت روما؟", False),
        ("42?", True),
    ],
)
def test_the_relevance_bar_judges_only_questions_its_model_can_read(question, judged):
    from typedrag.abstain import readable

    assert readable(question) is judged


# ---------------------------------------------------------------- the reading flow, played (typedrag.reading)

EARLIER = [
    Turn(role="user", content="Tell me about the Titanic."),
    Turn(role="assistant", content="It sank in 1912 [1]."),
]


def test_a_question_without_an_earlier_question_is_read_as_asked_with_no_step():
    played = play(reading("Why did it sink?", [Turn(role="assistant", content="Hello.")], 500), lambda step: None)
    assert played.steps == [] and played.outcome[1] is None and played.outcome[0].searches == ("Why did it sink?",)


def test_offline_a_follow_up_is_read_from_the_conversations_own_words():
    read = Standalone(
        "Why did it sink? (Titanic)",
        ("Why did it sink? Why did it sink? Titanic", "Why did it sink?"),
        ("Titanic",),
        True,
    )
    played = play(reading("Why did it sink?", EARLIER, 500), lambda step: read)
    rewrite, read_step = played.steps
    assert (
        isinstance(rewrite, RewriteFollowUp) and "user: Tell me about the Titanic." in rewrite.task.prompt.user
    )  # asked, none offline
    assert isinstance(read_step, ReadFollowUp) and read_step.dialogue == tuple(EARLIER) and read_step.max_chars == 500
    standalone, how = played.outcome
    assert standalone is read and how.by == "offline" and how.carried == ["Titanic"] and how.history_turns == 2


def test_a_models_rewrite_is_searched_alone_and_one_that_fails_is_recorded_and_read_offline():
    played = play(
        reading("Why did it sink?", EARLIER, 500),
        lambda step: Rewritten("Why did the Titanic sink?", "llm:m"),
        model=True,
    )
    standalone, how = played.outcome
    assert [type(s) for s in played.steps] == [RewriteFollowUp]
    assert standalone.searches == ("Why did the Titanic sink?",) and how.by == "llm:m" and how.rewritten
    same = play(
        reading("Why did it sink?", EARLIER, 500), lambda step: Rewritten("why did it sink?", "llm:m"), model=True
    ).outcome
    assert same[0].question == "Why did it sink?" and not same[1].rewritten  # kept as asked

    def failing(step):
        if isinstance(step, RewriteFollowUp):
            raise PlanFailed("no valid rewrite")
        return Standalone("Why did it sink?", ("Why did it sink?",))

    played = play(reading("Why did it sink?", EARLIER, 500), failing, model=True)
    assert [type(s) for s in played.of(ReadFollowUp)] == [ReadFollowUp] and played.outcome[1].by == "offline"
    assert [(n.step, n.reason.split(";")[0]) for n in played.notes] == [("rewrite", "PlanFailed: no valid rewrite")]

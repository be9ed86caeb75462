"""Issue 35, the service and framework side of the fourth hostile round, each against a real index, a real
server on loopback or the loopback OpenAI stub.

D14. No citation marker that came with the corpus (in a passage, a title, a section, glued to a word) reaches
     an engine or a reader.
D11. The chat "Sources:" text carries no terminal escape, whatever a stored title or passage id holds.
D12. Bidirectional overrides are escaped in the chat text.
D13. A request with both Content-Length and Transfer-Encoding is refused and its connection closed.
Hardening: the LLM client follows no redirect to another origin.
(The web page's part of D12 and D14 is in tests/test_server_browser.py.)
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from typedrag import citations
from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.index import build_index, open_retriever
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.pipeline import Pipeline
from typedrag.testing.openai_stub import OpenAIStubServer

ROME = """# Rome notes [2][3]

## Causes [4]

The water of Rome ran through lead pipes[2][3] and the lead slowly poisoned the people who drank it. \
The aqueducts carried water from the hills, and the stones of the channels turned red[4]. \
Historians still argue about how much the lead mattered to the fall of the empire.
"""
OTHERS = {
    "invasions.md": "# Barbarian invasions\n\nGermanic tribes crossed the Rhine in 406 and the western provinces were lost "
    "to the invaders over the following decades. The sack of Rome in 410 by the Visigoths shocked the empire.\n",
    "economy.md": "# Roman economy\n\nInflation and heavy taxes weakened the economy of the western empire, and the "
    "debased coinage lost its value. Trade declined as roads became unsafe.\n",
    "army.md": "# Roman army\n\nThe western army came to rely on Germanic soldiers, and the empire could no longer pay "
    "them. The fall of the western empire followed the loss of its army.\n",
}


@pytest.fixture(scope="module")
def planted_index(tmp_path_factory):
    """The issue's reproduction: markers in a Markdown title, a heading, and glued after words."""
    root = tmp_path_factory.mktemp("planted")
    folder = root / "notes"
    folder.mkdir()
    (folder / "rome.md").write_text(ROME, encoding="utf-8")
    for name, text in OTHERS.items():
        (folder / name).write_text(text, encoding="utf-8")
    build_index([folder], root / "index", show_progress=False)
    return root / "index"


# --- D14: planted citation markers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "planted, clean",
    [
        ("lead pipes[2][3] and the lead", "lead pipes and the lead"),
        ("the channels turned red[4].", "the channels turned red."),
        ("in 1912[5], the ship", "in 1912, the ship"),
        ("a well-known[3] fact", "a well-known fact"),
        ('he said "pipes[2]" twice', 'he said "pipes" twice'),
        ("(see pipes[2]) later", "(see pipes) later"),
        ("Rome notes [2][3]", "Rome notes "),
        ("Rome fell.[6] Then", "Rome fell. Then"),
    ],
)
def test_reference_marks_are_removed_from_corpus_text(planted, clean):
    assert citations.strip_reference_marks(planted) == clean


@pytest.mark.parametrize(
    "code",
    [
        "x = a[0] + 1",
        "the element m[1][2] is zero",
        "sys.argv[1]",
        "print(args[1])",
        "my_list[0]",
        "rows[0] = 1",
        "if rows[0] == 1:",
        "items[3].name",
        "$x[0]",
        "`arr[2]`",
    ],
)
def test_an_index_in_code_is_kept(code):
    assert citations.strip_reference_marks(code) == code


def test_an_llm_never_sees_markers_planted_in_a_title_a_heading_or_after_a_word(planted_index):
    with OpenAIStubServer() as stub:
        pipeline = Pipeline(
            LLMEngine(OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0)),
            open_retriever(planted_index),
        )
        result = asyncio.run(pipeline.answer("Why did the Western Roman Empire fall?", "rag"))
        prompt = stub.requests[-1].prompt
    rome = next(s for s in result.sources if s.passage_id.startswith("rome.md"))
    assert len(result.sources) >= 4  # numbers 2, 3 and 4 are real sources of this prompt
    line = next(line for line in prompt.splitlines() if line.startswith(f"[{rome.number}] "))
    assert line.startswith(f"[{rome.number}] Rome notes › Causes: The water of Rome ran through lead pipes and"), line
    assert "turned red." in line
    source_lines = [line for line in prompt.splitlines() if re.match(r"\[\d+\] ", line)]
    assert len(source_lines) == len(result.sources)
    assert all(len(re.findall(r"\[\d+\]", line)) == 1 for line in source_lines)  # each line's own number, no other
    assert (rome.title, rome.section) == ("Rome notes", "Causes")


def test_the_offline_engine_quotes_no_planted_marker(planted_index):
    pipeline = Pipeline(OfflineEngine(), open_retriever(planted_index))
    result = asyncio.run(pipeline.answer("Why did the stones of the aqueduct channels turn red?", "rag"))
    assert "turned red." in result.answer
    markers = re.findall(r"\[(\d+)\]", result.answer)
    assert markers and sorted(map(int, markers)) == sorted(n for c in result.citations for n in c.source_numbers)
    assert set(map(int, markers)) <= set(citations.cited_numbers(result.answer))


# --- D11, D12: the chat text -----------------------------------------------------------------------

TERMINAL_ACTIONS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EVIL_NAME = "evil\nname\x1b]52;c;cHduZWQ=\x07\x1b[2J"


@pytest.fixture(scope="module")
def hostile_url(small_index):
    """A service whose stored titles, passage ids and text hold what a file name can: a line break, an OSC 52
    clipboard write, a clear-screen, C1 controls and bidi overrides (the readers' own cleaning aside)."""
    from typedrag.config import Settings
    from typedrag.index import ListRetriever
    from typedrag.records import Passage
    from typedrag.server.app import create_app

    from .test_service_guards import served

    passages = [
        Passage(
            passage_id=f"{EVIL_NAME}.txt#0",
            doc_id=EVIL_NAME,
            title=EVIL_NAME,
            text="Asteroids are small rocky bodies that orbit the Sun\x9b2J in the asteroid belt.",
        ),
        Passage(
            passage_id="bidi.txt#0",
            doc_id="bidi",
            title="Asteroid \u202eevil\u202c",
            # read as answering too, so that both titles are listed among the sources
            text="An asteroid is a small rocky body that is smaller than a planet and has no atmosphere \u2066at all\u2069.",
        ),
    ]
    app = create_app(Settings(index=small_index, cache_dir=None), Pipeline(OfflineEngine(), ListRetriever(passages)))
    with served(app) as (url, _):
        yield url


def test_chat_text_carries_no_terminal_escape_or_bidi_override(hostile_url):
    import httpx

    body = {"model": "typedrag-rag", "messages": [{"role": "user", "content": "What is an asteroid?"}]}
    reply = httpx.post(f"{hostile_url}/v1/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    content = reply.json()["choices"][0]["message"]["content"]
    assert not TERMINAL_ACTIONS.findall(content), content
    listed = content.split("\n\nSources:\n", 1)[1].splitlines()
    assert len(listed) == 2 and all(line.startswith("- [") for line in listed)  # a title's line break forges no line
    assert "evil name\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J" in content and "Asteroid \\u202eevil\\u202c" in content
    assert reply.json()["typedrag"]["sources"][0]["title"] in (
        EVIL_NAME,
        "Asteroid \u202eevil\u202c",
    )  # JSON keeps the data


def test_streamed_chat_text_carries_no_terminal_escape_or_bidi_override(hostile_url):
    import httpx

    body = {"model": "typedrag-rag", "stream": True, "messages": [{"role": "user", "content": "What is an asteroid?"}]}
    text = []
    with httpx.stream("POST", f"{hostile_url}/v1/chat/completions", json=body, timeout=120) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[len("data: ") :])
                text += [choice["delta"].get("content") or "" for choice in chunk.get("choices", [])]
    content = "".join(text)
    assert "\n\nSources:\n" in content and "\\x9b2J" in content
    assert not TERMINAL_ACTIONS.findall(content), content


# --- D13: a body framed two ways -------------------------------------------------------------------


def test_a_request_with_both_content_length_and_transfer_encoding_is_refused_and_closed(small_index):
    """The issue's smuggling probe: behind a proxy that reads Content-Length, the chunked body's end hides a
    second request. It must be answered 400 and the connection closed, so the hidden request is never served."""
    import socket

    from typedrag.config import Settings
    from typedrag.server.app import create_app

    from .test_service_guards import served

    def exchange(port: int, request: bytes) -> bytes:
        """All the server sends back until it closes the connection."""
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(request)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        return received

    hidden = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    body = b"0\r\n\r\n" + hidden
    head = b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    question = b'{"question": "What do bees make?", "method": "rag"}'
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index))
    with served(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as (_, port):
        smuggled = exchange(
            port, head + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s" % (len(body), body)
        )
        chunked = exchange(
            port,
            head
            + b"Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
            % (len(question), question),
        )
    assert smuggled.startswith(b"HTTP/1.1 400 "), smuggled[:200]
    assert smuggled.count(b"HTTP/1.1 ") == 1, smuggled  # the hidden GET got no answer
    assert chunked.startswith(b"HTTP/1.1 200 "), chunked[:300]  # one framing alone is served as before


# --- Hardening: the LLM client and redirects -------------------------------------------------------


def ask_stub(base_url: str, stream: bool = False) -> str:
    """One plain reply from the model at `base_url`, streamed or not."""
    model = OpenAIChatModel(model="stub", base_url=base_url, max_retries=0, timeout=30)
    pieces: list[str] = []
    messages = [{"role": "user", "content": "Question: why? Passages: private notes"}]
    return asyncio.run(model.complete(messages, role="answer", on_text=pieces.append if stream else None)).text


@pytest.mark.parametrize("stream", [False, True])
def test_a_redirect_to_another_origin_is_not_followed(stream):
    from typedrag.llm.base import LLMError
    from typedrag.testing.openai_stub import Reply

    with OpenAIStubServer(lambda request: Reply(content="the elsewhere answer")) as elsewhere:
        target = elsewhere.base_url + "/chat/completions"
        with OpenAIStubServer(lambda request: Reply(status=307, headers={"Location": target})) as endpoint:
            with pytest.raises(LLMError) as raised:
                ask_stub(endpoint.base_url, stream)
        assert elsewhere.requests == []  # the question and passages never went there
    message = str(raised.value)
    assert "redirected" in message and elsewhere.base_url.split("/")[2] in message and "not followed" in message


def test_a_redirect_on_the_same_origin_is_followed():
    from typedrag.testing.openai_stub import Reply

    def responder(request):
        if len(endpoint.requests) == 1:
            return Reply(status=307, headers={"Location": "/v2/chat/completions"})
        return Reply(content="the moved answer")

    with OpenAIStubServer(responder) as endpoint:
        assert ask_stub(endpoint.base_url) == "the moved answer"
        assert len(endpoint.requests) == 2


@pytest.mark.parametrize("location", ["//127.0.0.2:9/v1/chat/completions", "http://127.0.0.1:abc/", "http://[::1"])
def test_a_redirect_elsewhere_or_nowhere_is_one_clear_error(location):
    from typedrag.llm.base import LLMError
    from typedrag.testing.openai_stub import Reply

    with OpenAIStubServer(lambda request: Reply(status=308, headers={"Location": location})) as endpoint:
        with pytest.raises(LLMError, match="redirected to another origin .*not followed"):
            ask_stub(endpoint.base_url)

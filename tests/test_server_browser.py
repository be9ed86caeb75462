"""The web page in real headless Chromium: ask, watch progress, read a cited answer, click a citation."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} not found: apt-get install -y chromium (CI installs it)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download needed)")
pytest.importorskip("fastapi", reason="fastapi is a dependency of typedrag: pip install -e .")

from test_server import classifier, offline_pipeline, serving  # noqa: E402,F401  (tests/ is on sys.path, as for conftest)

from typedrag.config import Settings  # noqa: E402
from typedrag.pipeline import Pipeline  # noqa: E402
from typedrag.server.app import create_app  # noqa: E402

# Set TYPEDRAG_SAVE_SCREENSHOT=docs/screenshot-web.png to refresh the picture in the docs; a plain test
# run never writes into the checkout.
SAVE_SCREENSHOT = os.environ.get("TYPEDRAG_SAVE_SCREENSHOT")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class SlowRetriever:
    """The real index, 0.5 s slower per search, so progress visibly arrives before the answer."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def search(self, query, k=10):
        time.sleep(0.5)
        return self.inner.search(query, k)

    def search_many(self, queries, k=10):
        time.sleep(0.5)
        return self.inner.search_many(queries, k)


class GatedEngine:
    """The real offline engine, whose step that combines the aspects of a reason question waits while the test holds
    `ANSWER_GATE` closed: the page's progress is read while its answer cannot have come yet, however loaded the
    machine (with only the slow retriever, a loaded CI run once wrote the answer before the page was read)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def write(self, task, trace, on_text=None):
        if task.role.startswith("aggregate:"):
            await asyncio.to_thread(ANSWER_GATE.wait, 120)  # a failed test that never opens it frees the server
        return await self.inner.write(task, trace, on_text=on_text)


ANSWER_GATE = threading.Event()
ANSWER_GATE.set()


@contextmanager
def browsing(url: str):
    """A fresh headless Chromium page on `url`, closed after."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            page.goto(url)
            yield page
        finally:
            browser.close()


def ask(page, question: str, method: str) -> None:
    """Ask `question` on the page by `method` (typed, rag, ...)."""
    page.fill("#question", question)
    page.select_option("#method", method)
    page.click("#submit")


def done(page, timeout: int = 30_000) -> None:
    """Wait for the Done line that ends an answer's progress."""
    sync_api.expect(page.locator("#progress li").last).to_contain_text("Done", timeout=timeout)


@pytest.fixture(scope="module")
def page_url(offline_pipeline, small_index):
    p = offline_pipeline
    slow = Pipeline(GatedEngine(p.engine), SlowRetriever(p.retriever), classifier=p.classifier, reranker=p.reranker)
    with serving(create_app(Settings(index=small_index, cache_dir=None), slow)) as url:
        yield url


@pytest.fixture()
def page(page_url):
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.hosts = set()  # every host the page talked to: must be ours alone (air-gapped)
        page.console_errors = []
        page.on("request", lambda request: page.hosts.add(urlparse(request.url).netloc))
        page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
        page.goto(page_url)
        yield page
        browser.close()


def test_ask_watch_progress_and_follow_a_citation(page, page_url, tmp_path):
    ANSWER_GATE.clear()
    try:
        ask(page, "Why did the Western Roman Empire fall?", "typed")
        sync_api.expect(page.locator("#progress")).to_contain_text("Aspect done", timeout=60_000)
        assert page.locator("#answer").inner_text() == "working…"  # progress shows live, before the answer
    finally:
        ANSWER_GATE.set()
    done(page, timeout=60_000)
    progress = page.locator("#progress li").all_inner_texts()
    steps = [line.split(" s", 1)[1].strip() for line in progress]
    assert steps[0] == "Question sent"
    assert steps[1].startswith("Type decided: REASON")
    assert steps[2].startswith("Plan made")
    assert sum(s.startswith(("Aspect done", "Aspect dropped")) for s in steps) >= 2  # each aspect as it ends
    assert any(s.startswith("Aspect done") for s in steps)
    assert "source passage" in steps[-3] and steps[-2] == "Answer written"

    citations = page.locator("#answer a.cite")
    assert citations.count() >= 1
    first = citations.first
    number = first.get_attribute("data-source")
    first.click()
    source = page.locator(f"#source-{number}")
    sync_api.expect(source).to_have_class("highlight")
    assert page.locator(".sources li.highlight").count() == 1
    assert source.locator(".title").inner_text() and "#" in source.locator(".source-id").inner_text()
    page.wait_for_function(
        "n => { const r = document.getElementById('source-' + n).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }",
        arg=number,
    )
    page.click("#details-summary")  # the trace is in the details view, folded until asked for
    trace = page.locator("#trace").inner_text()
    assert "REASON" in trace and "plan" in trace and "aspects" in trace

    assert page.hosts == {urlparse(page_url).netloc} and not page.console_errors


def answered(page, count):
    """Wait until the page has finished `count` answers since it was loaded (each ends with a Done line)."""
    page.wait_for_function(
        "n => [...document.querySelectorAll('#progress li')].some(li => li.textContent.includes('Done')) && window.__done >= n",
        arg=count,
        timeout=90_000,
    )


def test_a_conversation_follow_ups_the_history_shown_and_starting_over(page, page_url, tmp_path):
    bodies = []
    page.on("request", lambda request: request.method == "POST" and bodies.append(json.loads(request.post_data)))
    page.evaluate("""() => { window.__done = 0; new MutationObserver(() => {
        const last = document.querySelector('#progress li:last-child');
        if (last && last.textContent.includes('Done') && !last.dataset.counted) { last.dataset.counted = '1'; window.__done += 1; }
    }).observe(document.getElementById('progress'), {childList: true}); }""")
    page.fill("#question", "Why did the Western Roman Empire fall?")
    page.click("#submit")
    answered(page, 1)
    assert page.locator("#thread").is_hidden() and page.locator("#start-over").is_visible()
    page.fill("#question", "Which of those causes came from outside its borders?")
    page.click("#submit")
    answered(page, 2)

    turns = page.locator("#thread .turn")
    assert turns.count() == 1 and turns.first.locator(".asked").inner_text() == "Why did the Western Roman Empire fall?"
    assert bodies[0]["history"] == [] and [t["role"] for t in bodies[1]["history"]] == ["user", "assistant"]
    assert bodies[1]["history"][0]["content"] == "Why did the Western Roman Empire fall?"
    read_as = page.locator("#meta .read-as-line").inner_text()
    assert (
        read_as.startswith("Read as: Which of those causes came from outside its borders?")
        and "Roman Empire" in read_as
    )
    assert any(
        line.split(" s", 1)[1].strip().startswith("Read as:") for line in page.locator("#progress li").all_inner_texts()
    )
    page.click("#details-summary")
    assert "conversation" in page.locator("#trace").inner_text() and "read as" in page.locator("#trace").inner_text()

    shot = tmp_path / "screenshot-web.png"
    page.screenshot(path=str(shot), full_page=True)
    if SAVE_SCREENSHOT:
        shutil.copyfile(shot, SAVE_SCREENSHOT)
    assert shot.stat().st_size > 10_000

    page.click("#start-over")
    assert (
        page.locator("#thread").is_hidden()
        and page.locator("#output").is_hidden()
        and page.locator("#thread .turn").count() == 0
    )
    page.fill("#question", "Which of those causes came from outside its borders?")
    page.click("#submit")
    answered(page, 3)
    assert bodies[2]["history"] == [] and page.locator("#meta .read-as-line").count() == 0
    assert page.hosts == {urlparse(page_url).netloc} and not page.console_errors


def test_an_answer_the_documents_do_not_give_is_shown_as_such(page):
    ask(page, "Which band played music on the deck of the Titanic?", "rag")
    done(page, timeout=60_000)
    assert page.locator("#answer").inner_text().startswith("The documents do not answer this.")
    assert page.locator("#sources-title").text_content() == "Nearest passages, not an answer"
    assert page.locator("#meta .pill.none").text_content() == "the documents do not answer"
    assert page.locator("#answer a.cite").count() == 0
    assert any("The documents do not answer" in line for line in page.locator("#progress li").all_inner_texts())


def test_the_answer_appears_word_by_word_before_the_result(page_url, small_index, classifier):
    """With an LLM that writes 8 words a second, the page shows part of the answer while it is written."""
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import open_retriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer, Reply

    words = "Sunlight water and carbon dioxide become sugar in the chloroplasts of green leaves every day [1]."
    with OpenAIStubServer(lambda request: Reply(content=words), token_rate=8) as stub:
        chat = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
        pipeline = Pipeline(LLMEngine(chat), open_retriever(small_index), classifier=classifier)
        with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url, browsing(url) as page:
            ask(page, "How does photosynthesis work?", "rag")
            # part of the answer is on the page while the result event has not come yet
            partial = page.wait_for_function(
                """() => {
                    const text = document.getElementById('answer').textContent;
                    const done = [...document.querySelectorAll('#progress li')].some(li => li.textContent.includes('Done'));
                    return text.startsWith('Sunlight') && !done ? text : null;
                }""",
                timeout=30_000,
            ).json_value()
            done(page)
            final = page.locator("#answer").inner_text()
    assert len(partial) < len(final) and final == words and final.startswith(partial)


def test_bad_question_shows_the_server_message(page):
    page.fill("#question", "why " * 600)
    page.click("#submit")
    error = page.locator("#error")
    sync_api.expect(error).to_be_visible(timeout=30_000)
    assert "Error 422" in error.inner_text() and "over the limit" in error.inner_text()


def test_only_the_answers_citations_become_links(small_index, classifier):
    """Issue 35, D14: a "[2]" glued to a word names no source, though source 2 exists; only [1] is a citation."""
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import FunctionRetriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer, Reply

    texts = [
        "Photosynthesis turns water and carbon dioxide into sugar.",
        "Chloroplasts hold chlorophyll, which absorbs light.",
    ]
    words = "Sunlight reaches the chloroplasts[2] of green leaves, where water becomes sugar [1]."
    with OpenAIStubServer(lambda request: Reply(content=words)) as stub:
        chat = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
        pipeline = Pipeline(LLMEngine(chat), FunctionRetriever(lambda query, k: texts), classifier=classifier)
        with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url, browsing(url) as page:
            ask(page, "How does photosynthesis work?", "rag")
            done(page)
            links = page.locator("#answer a.cite").all_inner_texts()
            answer = page.locator("#answer").inner_text()
            sources = page.locator("#sources li").all_inner_texts()
            page.click("#details-summary")
            trace = page.locator("#trace").inner_text()
    assert len(sources) == 1 and sources[0].startswith("[1]")  # the cited source is listed...
    assert (
        "passages not cited" in trace and "[2]" in trace
    )  # ...source 2 exists: the glued "[2]" could have been linked to it
    assert links == ["[1]"] and answer == words


def test_bidi_overrides_and_controls_in_source_names_are_shown_escaped(small_index, classifier):
    """Issue 35, D12 and D11: a title, passage id and text holding a right-to-left override and terminal escapes
    are shown with visible escapes, never obeyed ("Asteroid \\u202eevil" must not read "Asteroid live")."""
    from typedrag.engines.offline import OfflineEngine
    from typedrag.index import ListRetriever
    from typedrag.records import Passage

    hostile = Passage(
        passage_id="evil\x1b]52;c;cHduZWQ=\x07\u202etxt.exe#0",
        doc_id="evil",
        title="Asteroid \u202eevil\u202c",
        text="An asteroid is a small rocky body that orbits the Sun \u2066inside\u2069 the asteroid belt.",
    )
    plain = Passage(
        passage_id="comet#0",
        doc_id="comet",
        title="Comet",
        text="A comet is an icy body that grows a tail near the Sun.",
    )
    pipeline = Pipeline(OfflineEngine(), ListRetriever([hostile, plain]), classifier=classifier)
    with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url, browsing(url) as page:
        ask(page, "What is an asteroid?", "rag")
        done(page)
        shown = page.locator("#output").inner_text()
        titles = page.locator("#sources .title").all_inner_texts()
        ids = page.locator("#sources .source-id").all_inner_texts()
        link_titles = [
            page.locator("#answer a.cite").nth(i).get_attribute("title")
            for i in range(page.locator("#answer a.cite").count())
        ]
    hidden = [
        c
        for c in shown + "".join(filter(None, link_titles))
        if c in "\x1b\x07\u202c\u202e\u2066\u2069" or "\x80" <= c <= "\x9f"
    ]
    assert not hidden, hidden
    assert "Asteroid \\u202eevil\\u202c" in titles
    assert "evil\\x1b]52;c;cHduZWQ=\\x07\\u202etxt.exe#0" in ids
    assert "\\u2066inside\\u2069" in page_text_of(shown)


def page_text_of(text: str) -> str:
    return " ".join(text.split())


# --- issue 41 #5, #6 and issue 42 #11: what a reader sees, and a conversation's history bounded ----------------


def results_of(page) -> list[dict]:
    """Every result event the page receives from now on (the answer's whole trace, as the page got it)."""
    found = []

    def read(response):
        if response.url.endswith("/v1/answer/stream"):
            for block in response.text().split("\n\n"):
                if block.startswith("event: result\n"):
                    found.append(json.loads(block.split("data: ", 1)[1]))

    page.on("response", read)
    return found


def test_an_offline_answer_shows_no_diagnostics_and_keeps_them_in_the_details_view(page):
    """Issue 41 #5: the page showed "fallback" pills and "LLM calls 2 · tokens 0+0" for offline answers."""
    results = results_of(page)
    ask(page, "Why did the Western Roman Empire fall?", "typed")
    done(page, timeout=60_000)
    page.wait_for_function("() => true")  # let the response handler run
    result = results[-1]
    assert result["engines"]["generator"] == "offline-extractive" and result["fallbacks"]  # there is something to keep
    meta = page.locator("#meta").inner_text()
    assert "fallback" not in meta.lower() and page.locator("#meta .pill.warn").count() == 0
    assert page.locator("#progress li").last.inner_text().endswith("Done")  # no "· 5 LLM calls" for an offline answer
    assert page.locator("#trace").is_hidden()  # folded: the details are there when asked for
    assert f"{len(result['fallbacks'])} note" in page.locator("#details-summary").inner_text()
    page.click("#details-summary")
    trace = page.locator("#trace").inner_text()
    assert all(f["reason"] in trace for f in result["fallbacks"])
    assert "LLM calls" not in trace and "tokens" not in trace and "by the offline engine (no LLM)" in trace


def test_sources_are_the_cited_ones_and_an_earlier_turn_keeps_its_own_with_their_links(small_index, classifier):
    """Issue 41 #6: every retrieved passage was listed as a source (Baseball and Venus under a comet answer citing
    only [3]), and a turn moved into the thread lost its sources and its citation links."""
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import FunctionRetriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer, Reply

    texts = [
        "Baseball is played by two teams of nine.",
        "Venus is the second planet from the Sun.",
        "A comet is an icy body that grows a glowing coma and tail near the Sun.",
    ]
    with OpenAIStubServer(lambda request: Reply(content="A comet is an icy body that grows a tail [3].")) as stub:
        chat = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
        pipeline = Pipeline(LLMEngine(chat), FunctionRetriever(lambda query, k: texts), classifier=classifier)
        with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url, browsing(url) as page:
            ask(page, "What is a comet?", "rag")
            done(page)
            listed = [li.get_attribute("id") for li in page.locator("#sources li").all()]
            assert listed == ["source-3"]  # the one it cites, not Baseball and Venus
            ask(page, "Why does its tail glow?", "rag")
            done(page)
            turn = page.locator("#thread .turn").first
            link = turn.locator(".said a.cite")
            assert link.count() == 1 and link.get_attribute("data-source") == "3"
            assert [li.get_attribute("id") for li in turn.locator(".sources li").all()] == [
                "t0-source-3"
            ]  # its own, folded under it
            link.click()
            target = turn.locator("#t0-source-3")
            sync_api.expect(target).to_be_visible()
            sync_api.expect(target).to_have_class("highlight")
            assert (
                "icy body" in target.inner_text() and page.locator("#source-3").count() == 1
            )  # the new answer's list is its own


def test_a_long_conversation_sends_a_bounded_window_and_says_so(page):
    """Issue 42 #11: the page sent its whole history, so after a few hundred turns every question got 413."""
    from typedrag.history import MAX_TURN_CHARS, MAX_TURNS

    bodies, statuses = [], []
    page.on("request", lambda request: request.method == "POST" and bodies.append(request.post_data))
    page.on(
        "response", lambda response: response.url.endswith("/v1/answer/stream") and statuses.append(response.status)
    )
    # Six hundred earlier turns of 6,000 characters (what a few hundred long answers add up to): 3.6 MB.
    page.evaluate("""() => { history = Array.from({length: 600}, (_, i) =>
        ({role: i % 2 ? "assistant" : "user", content: (i % 2 ? "answer " : "question ") + "x".repeat(6000)})); }""")
    ask(page, "How do I bake bread?", "rag")
    done(page, timeout=60_000)
    sent = json.loads(bodies[-1])["history"]
    assert statuses == [200] and page.locator("#error").is_hidden()
    assert 0 < len(sent) <= MAX_TURNS and sent[0]["role"] == "user"
    assert all(len(turn["content"]) <= MAX_TURN_CHARS for turn in sent) and len(bodies[-1]) < 128 * 1024
    note = page.locator("#window-note")
    assert note.is_visible() and "no longer sent" in note.inner_text()
    page.click("#start-over")
    assert note.is_hidden()


def test_the_pages_window_is_the_servers_bound():
    """The page's constants are typedrag.history's (one is JavaScript, so a test keeps them equal)."""
    import re

    from typedrag.history import MAX_TURN_CHARS, MAX_TURNS

    script = (Path(__file__).resolve().parents[1] / "typedrag" / "server" / "static" / "app.js").read_text(
        encoding="utf-8"
    )
    assert re.search(r"const WINDOW_TURNS = (\d+);", script).group(1) == str(MAX_TURNS)
    assert re.search(r"const TURN_CHARS = (\d+);", script).group(1) == str(MAX_TURN_CHARS)


def test_what_the_model_adds_of_its_own_is_shown_apart_from_the_cited_answer(small_index, classifier):
    """knowledge = labelled, chosen on the page: the cited answer in the answer's box, the model's own sentences
    in a box of their own under it, in the thread too once a follow-up is asked, and named in the details."""
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.index import FunctionRetriever
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

    def knowing(request):
        if request.schema_name == "LabelledAnswer":
            return Reply(
                content=json.dumps(
                    {
                        "from_sources": "Water becomes sugar in the chloroplasts [1].",
                        "not_covered": "the history",
                        "from_own_knowledge": ["Jan Ingenhousz described it in 1779."],
                    }
                )
            )
        return Reply(content=default_content(request))

    texts = ["Photosynthesis turns water and carbon dioxide into sugar in the chloroplasts."]
    with OpenAIStubServer(knowing) as stub:
        chat = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=30)
        pipeline = Pipeline(LLMEngine(chat), FunctionRetriever(lambda query, k: texts), classifier=classifier)
        with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline)) as url, browsing(url) as page:
            page.select_option("#knowledge", "labelled")
            ask(page, "How does photosynthesis work?", "rag")
            done(page)
            answer = page.locator("#answer").inner_text()
            own = page.locator("#unsourced")
            sync_api.expect(own).to_be_visible()
            shown_apart = own.inner_text()
            page.click("#details-summary")
            trace = page.locator("#trace").inner_text()
            ask(page, "And who found it?", "rag")
            done(page)
            kept = page.locator("#thread .turn .unsourced").inner_text()
    assert answer == "Water becomes sugar in the chloroplasts [1]."  # nothing of the model's own in the cited answer
    assert (
        shown_apart.lower().startswith("not from your documents")
        and "Jan Ingenhousz described it in 1779." in shown_apart
    )
    assert "labelled: 1 sentence by openai-compatible:stub" in trace and "the history" in trace
    assert "Jan Ingenhousz" in kept


def test_the_api_docs_render_offline(page_url):
    """Issue 58 #6: /docs (Swagger UI) shows the API with nothing fetched from off this server."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page()
            hosts, failed, errors = set(), [], []
            page.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
            page.on("requestfailed", lambda request: failed.append(request.url))
            page.on("console", lambda message: message.type == "error" and errors.append(message.text))
            page.goto(page_url + "/docs")
            sync_api.expect(page.locator(".swagger-ui .info .title")).to_contain_text("typedrag", timeout=30_000)
            paths = page.locator(".swagger-ui .opblock-summary-path").all_inner_texts()
            assert "/v1/answer" in paths and "/v1/chat/completions" in paths
        finally:
            browser.close()
    assert hosts == {urlparse(page_url).netloc} and not failed and not errors

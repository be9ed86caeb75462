"""The MCP server (typedrag.mcp_server) driven by the official `mcp` SDK's own client: over stdio (a spawned
`typedrag mcp --index ...`), over Streamable HTTP (a real `typedrag serve` on a free loopback port, /mcp behind
the API key), and in process (the seam a server with several collections plugs into)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.index import open_retriever
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.mcp_server import Collection, CollectionInfo, SingleIndex, UnknownCollection, build_server
from typedrag.pipeline import Pipeline
from typedrag.testing.openai_stub import OpenAIStubServer, Reply
from test_server import classifier  # noqa: E402,F401  (tests/ is on sys.path)

mcp = pytest.importorskip("mcp", reason="the test extra installs mcp: pip install -e '.[test]'")
httpx2 = pytest.importorskip("httpx2", reason="mcp's own HTTP client")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

TYPEDRAG = Path(sys.executable).with_name("typedrag")  # the console script of this environment
COMPARISON = "What is the difference between a crocodile and an alligator?"
KEY = "mcp-test-key"


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment (PYTHONPATH included: the checkout under test), its own cache, no config file."""
    cleared = ("TYPEDRAG_CONFIG", "TYPEDRAG_LLM", "TYPEDRAG_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")
    return {
        **{k: v for k, v in os.environ.items() if k not in cleared},
        "TYPEDRAG_CACHE_DIR": str(tmp_path / "cache"),
        **extra,
    }


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content)


def assert_one_line_error(result, *words: str) -> None:
    assert result.is_error, text_of(result)
    message = text_of(result)
    assert "\n" not in message and "Traceback" not in message, message
    for word in words:
        assert word in message, message


# --- stdio: `typedrag mcp` spawned by the SDK's client --------------------------------------------


async def test_stdio_lists_searches_and_answers_offline(small_index, tmp_path):
    command = StdioServerParameters(
        command=str(TYPEDRAG), args=["mcp", "--index", str(small_index), "--llm", "offline"], env=env(tmp_path)
    )
    async with Client(command) as client:
        assert client.server_info.name == "typedrag"
        assert {tool.name for tool in (await client.list_tools()).tools} == {"list_collections", "search", "answer"}

        listed = await client.call_tool("list_collections", {})
        [default] = listed.structured_content["collections"]
        assert default["name"] == "default" and default["passages"] == 9
        assert default["generator"] == "offline-extractive" and default["retriever"].startswith("tantivy")

        found = await client.call_tool("search", {"query": "alligator snout", "k": 3})
        passages = found.structured_content["passages"]
        assert [p["number"] for p in passages] == [1, 2, 3]
        assert {p["id"] for p in passages[:2]} == {"croc#0", "gator#0"}
        assert {p["title"] for p in passages[:2]} == {"Crocodile", "Alligator"}
        assert all("section" in p and "page" in p and "link" in p for p in passages)
        assert "[1] croc#0: Crocodile" in text_of(found) or "[1] gator#0: Alligator" in text_of(found)

        answered = await client.call_tool("answer", {"question": COMPARISON})
        out = answered.structured_content
        assert not answered.is_error and out["method"] == "typed" and out["engine"] == "offline-extractive"
        assert out["type"]["type"] == "COMPARISON" and out["trace"]["strategy"] == "comparison"
        assert out["citations"] and out["trace"]["engines"]["generator"] == "offline-extractive"
        cited = {pid for c in out["citations"] for pid in c["passage_ids"]}
        assert cited <= {s["id"] for s in out["sources"]} and {"croc#0", "gator#0"} <= cited
        assert out["trace"]["llm_calls"] == 0 and out["trace"]["total_ms"] > 0
        text = text_of(answered)
        assert (
            out["answer"] in text and "Sources:" in text and "Type: COMPARISON" in text and "offline-extractive" in text
        )

        assert_one_line_error(await client.call_tool("answer", {"question": "   "}), "empty")
        assert_one_line_error(
            await client.call_tool("answer", {"question": "Why?", "collection": "nope"}),
            "unknown collection 'nope'",
            "default",
        )
        assert_one_line_error(
            await client.call_tool("answer", {"question": "Why?", "type": "sonnet"}), "unknown question type"
        )
        # the server carries on after a tool error
        again = await client.call_tool(
            "answer", {"question": "Why did the Western Roman Empire fall?", "method": "rag"}
        )
        assert not again.is_error and again.structured_content["type"] is None
        assert again.structured_content["trace"]["strategy"] == "rag"


def test_mcp_command_without_an_index_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [str(TYPEDRAG), "mcp", "--index", str(tmp_path / "missing")],
        capture_output=True, text=True, env=env(tmp_path), stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and not done.stdout  # stdout is the protocol's: nothing else goes there
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "missing" in lines[0], done.stderr


def test_mcp_command_without_the_extra_names_it_in_one_line(small_index, monkeypatch):
    from typedrag.cli import app

    for name in ("mcp", "mcp.server"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    out = CliRunner().invoke(app, ["mcp", "--index", str(small_index)])
    assert out.exit_code == 2, out.output
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "the MCP server needs the 'mcp' extra" in lines[0]
    assert "pip install 'typedrag[mcp]'" in lines[0]


def test_serve_without_the_extra_answers_mcp_with_the_line_that_names_it(small_index, monkeypatch):
    from test_server import serving

    from typedrag.config import Settings
    from typedrag.server.app import create_app
    from typedrag.server.service import ServerOptions

    for name in ("mcp", "mcp.server"):
        monkeypatch.setitem(sys.modules, name, None)
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index, "bm25"))
    with serving(create_app(Settings(index=small_index, cache_dir=None), pipeline, ServerOptions(api_key=KEY))) as url:
        refused = httpx.post(f"{url}/mcp", json={}, headers={"Authorization": "Bearer wrong"})
        missing = httpx.post(f"{url}/mcp", json={}, headers={"Authorization": f"Bearer {KEY}"})
        answered = httpx.post(f"{url}/v1/answer", json={"question": COMPARISON, "method": "rag"},
                              headers={"Authorization": f"Bearer {KEY}"}, timeout=60)  # fmt: skip
    assert refused.status_code == 401  # the key first: nothing about the server is told to a stranger
    assert missing.status_code == 501 and "pip install 'typedrag[mcp]'" in missing.json()["error"]["message"]
    assert answered.status_code == 200  # the rest of the service runs as ever


# --- Streamable HTTP: /mcp on a real `typedrag serve` ---------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(small_index, tmp_path_factory):
    """`typedrag serve` with an API key, offline; yields its base URL and, after, its log lines."""
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    log = (tmp / "serve.log").open("w")
    process = subprocess.Popen(
        [str(TYPEDRAG), "serve", "--index", str(small_index), "--llm", "offline", "--port", str(port)],
        stdout=log, stderr=log, env=env(tmp, TYPEDRAG_SERVER_API_KEY=KEY),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert process.poll() is None, (tmp / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url, tmp / "serve.log"
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def http_client(url: str, key: str | None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    return http, Client(streamable_http_client(f"{url}/mcp", http_client=http))


async def test_http_answers_the_sdk_client_behind_the_key(served):
    url, _ = served
    http, client = http_client(url, KEY)
    async with http, client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"list_collections", "search", "answer"}
        listed = await client.call_tool("list_collections", {})
        assert [c["name"] for c in listed.structured_content["collections"]] == ["default"]

        found = await client.call_tool("search", {"query": "Why did Rome fall?", "k": 2})
        assert [p["id"].split("#")[0] for p in found.structured_content["passages"]] == ["rome", "rome"]

        answered = await client.call_tool("answer", {"question": COMPARISON, "method": "typed"})
        out = answered.structured_content
        assert out["engine"] == "offline-extractive" and out["type"]["type"] == "COMPARISON" and out["citations"]

        bad = await client.call_tool("answer", {"question": "x" * 100_000})
        assert_one_line_error(bad, "question")
        plain = await client.call_tool("answer", {"question": COMPARISON, "method": "rag"})
        assert not plain.is_error and plain.structured_content["trace"]["strategy"] == "rag"


@pytest.mark.parametrize("key", ["wrong", None])
async def test_http_refuses_a_wrong_or_missing_key(served, key):
    url, log = served
    http, client = http_client(url, key)
    with pytest.raises(BaseException) as refused:  # the SDK reports the refused handshake as an error group
        async with http, client:
            await client.list_tools()
    assert "401" in repr(refused.value) or "error response" in repr(refused.value)
    raw = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                     headers={"Authorization": f"Bearer {key}"} if key else {})  # fmt: skip
    assert raw.status_code == 401 and raw.headers["www-authenticate"] == "Bearer"
    assert "API key" in raw.json()["error"]["message"]
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(e.get("path") == "/mcp" and e.get("status") == 401 for e in entries)


async def test_http_answers_count_against_the_servers_concurrency_limit(small_index):
    from test_server import serving

    from typedrag.config import Settings
    from typedrag.server.app import create_app
    from typedrag.server.service import ServerOptions

    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index, "bm25"))
    app = create_app(Settings(index=small_index, cache_dir=None), pipeline, ServerOptions(max_concurrency=1))
    with serving(app) as url:
        slots = app.state.service.slots
        http, client = http_client(url, None)
        async with http, client:
            slots.take()  # the one answer this server makes at a time is being made
            try:
                busy = await client.call_tool("answer", {"question": COMPARISON})
            finally:
                slots.give()
            assert_one_line_error(busy, "server busy")
            answered = await client.call_tool("answer", {"question": COMPARISON})
            assert not answered.is_error and slots.used == 0  # its slot given back


# --- in process: the seam, several collections, links, the LLM path -------------------------------


class TwoCollections:
    """What a server with a collections registry hands the tools: two indexes, one with links to its sources."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def list(self) -> list[CollectionInfo]:
        return [
            CollectionInfo(name=n, generator=self.pipeline.engine.name, description=d)
            for n, d in (("animals", "zoo"), ("history", ""))
        ]

    def open(self, name: str) -> Collection:
        if name == "animals":
            return Collection(name, self.pipeline, link=lambda source: f"/view/{source.passage_id}")
        if name == "history":
            return Collection(name, self.pipeline)
        raise UnknownCollection(f"no collection {name!r}")


async def test_the_collections_seam_names_and_links_what_it_serves(small_index):
    server = build_server(TwoCollections(Pipeline(OfflineEngine(), open_retriever(small_index, "bm25"))))
    async with Client(server) as client:
        listed = await client.call_tool("list_collections", {})
        assert [c["name"] for c in listed.structured_content["collections"]] == ["animals", "history"]
        assert "animals: ? passages" in text_of(listed) and "(zoo)" in text_of(listed)

        linked = await client.call_tool("search", {"query": "crocodile snout", "collection": "animals", "k": 1})
        [passage] = linked.structured_content["passages"]
        assert passage["link"] == f"/view/{passage['id']}" and f"<{passage['link']}>" in text_of(linked)
        unlinked = await client.call_tool("search", {"query": "crocodile snout", "collection": "history", "k": 1})
        assert unlinked.structured_content["passages"][0]["link"] is None

        answered = await client.call_tool("answer", {"question": COMPARISON, "collection": "animals"})
        assert answered.structured_content["collection"] == "animals"
        assert all(s["link"] == f"/view/{s['id']}" for s in answered.structured_content["sources"])
        assert_one_line_error(
            await client.call_tool("search", {"query": "x", "collection": "other"}), "no collection 'other'"
        )


async def test_single_index_is_the_collection_default(small_index):
    pipeline = Pipeline(OfflineEngine(), open_retriever(small_index, "bm25"))
    collections = SingleIndex(lambda: pipeline)
    assert [c.name for c in collections.list()] == ["default"] and collections.open("default").pipeline is pipeline
    with pytest.raises(UnknownCollection, match="collections: default"):
        collections.open("other")


async def test_an_llm_answer_names_its_engine_and_a_failing_endpoint_is_a_clean_tool_error(small_index):
    with OpenAIStubServer() as stub:
        model = OpenAIChatModel(model="stub", base_url=stub.base_url, max_retries=0, timeout=20)
        server = build_server(SingleIndex(lambda: Pipeline(LLMEngine(model), open_retriever(small_index, "bm25"))))
        async with Client(server) as client:
            answered = await client.call_tool("answer", {"question": COMPARISON, "method": "rag"})
            assert not answered.is_error, text_of(answered)
            assert answered.structured_content["engine"].startswith("openai-compatible:stub@")
            assert answered.structured_content["trace"]["llm_calls"] >= 1
            stub.reset(lambda request: Reply(content="model exploded at 10.0.0.7:8080", status=500))
            failed = await client.call_tool("answer", {"question": COMPARISON, "method": "rag"})
            assert_one_line_error(failed, "LLM endpoint failed")
            assert "10.0.0.7" not in text_of(failed)  # the upstream's details stay in the server's log
        await model.aclose()


async def test_stdio_with_data_serves_the_servers_collections_read_only(tmp_path, classifier):
    """`typedrag mcp --data DIR` beside a running `serve --data DIR`: the collections as they are, nothing written."""
    from typedrag.library import Library

    data = tmp_path / "data"
    library = Library(Pipeline(OfflineEngine(), None, classifier=classifier), data, ingest=False)
    try:
        collection = library.create("kb", retrieval="bm25")
        staging = collection.staging()
        staging.begin("bread.txt")
        staging.write(b"Bread making\n\nKnead the dough for about ten minutes until it is smooth and elastic.\n")
        staging.end()
        library.add(collection, staging.staged)
        library.ingest(collection)
    finally:
        library.close()
    before = sorted((str(p), p.stat().st_mtime_ns) for p in data.rglob("*") if p.is_file())
    command = StdioServerParameters(
        command=str(TYPEDRAG), args=["mcp", "--data", str(data), "--llm", "offline"], env=env(tmp_path)
    )
    async with Client(command) as client:
        listed = await client.call_tool("list_collections", {})
        assert [c["name"] for c in listed.structured_content["collections"]] == ["kb"]
        found = await client.call_tool("search", {"query": "knead dough", "collection": "kb"})
        assert found.structured_content["passages"][0]["id"] == "bread.txt#0"
    assert sorted((str(p), p.stat().st_mtime_ns) for p in data.rglob("*") if p.is_file()) == before

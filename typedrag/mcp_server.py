"""typedrag as an MCP server: the assistants and IDE agents a team already uses search its documents and ask
them, through the official `mcp` SDK (the `mcp` extra).

Three tools: `list_collections`, `search` (passages with ids, titles, sections, pages and links) and `answer`
(the answer, its citations, the question's type, the engine and a summary of the trace). Each returns a text an
assistant reads and the same content as structured data (its schema published with the tool).

Two transports: stdio (`typedrag mcp --index DIR`, `serve_stdio`) and Streamable HTTP on `typedrag serve` at
/mcp (typedrag.server.mcp_http mounts `http_endpoint`), stateless, so replicas need no shared session store.

The tools find collections through `Collections`, the one seam between them and wherever collections live:
`SingleIndex` serves one pipeline as the collection "default". A server with several collections implements
`Collections` over its registry and hands that to `build_server` / `http_endpoint` instead.

No `from __future__ import annotations` here: the SDK reads each tool's annotations, which name classes
imported inside `build_server` (the SDK is optional), so they are evaluated where the tools are defined.
"""

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Field

from typedrag import __version__
from typedrag.errors import LLMError, ModelUnavailable, UserError
from typedrag.extras import require
from typedrag.index.base import IndexUnusableError
from typedrag.pipeline import Pipeline
from typedrag.questions import clean_question
from typedrag.records import ScoredPassage
from typedrag.result import AnswerResult, Engines, Source

if TYPE_CHECKING:
    from mcp.server import MCPServer

log = logging.getLogger("typedrag.mcp")

DEFAULT_COLLECTION = "default"
FEATURE = "the MCP server"
MAX_PASSAGES = 50  # a search returns at most this many passages


# ------------------------------------------------------------------ the seam: where collections come from


class CollectionInfo(BaseModel):
    """One collection as `list_collections` shows it."""

    name: str
    description: str = ""
    retriever: str | None = Field(None, description="the search engine, e.g. tantivy-hybrid/minilm")
    generator: str = Field(
        description="the engine that writes answers, e.g. offline-extractive or openai-compatible:<model>@<host>"
    )
    passages: int | None = Field(None, description="passages in the index, where it says")


@dataclass
class Collection:
    """What the tools need of one collection: its pipeline, how to link to a source's original (None: no link
    is known; a source viewer gives one), and what an answer must hold while it is made (a server's
    concurrency slot: a UserError when none is free)."""

    name: str
    pipeline: Pipeline
    link: Callable[[Source], str | None] = field(default=lambda source: None)
    admit: Callable[[], AbstractContextManager[Any]] = nullcontext


class UnknownCollection(UserError):
    """A collection name the server does not serve; the message names those it does."""


class CollectionsOut(BaseModel):
    """What `list_collections` returns."""

    collections: list[CollectionInfo]


class Collections(Protocol):
    """The collections the tools serve. `open` raises UnknownCollection for a name `list` does not give."""

    def list(self) -> list[CollectionInfo]: ...

    def open(self, name: str) -> Collection: ...


class SingleIndex:
    """One pipeline (one index) as the collection "default": `typedrag mcp --index DIR`, and `serve --index DIR`.
    `pipeline` is a function so a server can hand over the pipeline its lifespan builds later."""

    def __init__(
        self,
        pipeline: Callable[[], Pipeline],
        name: str = DEFAULT_COLLECTION,
        description: str = "",
        admit: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self._pipeline, self.name, self.description, self.admit = pipeline, name, description, admit

    def list(self) -> list[CollectionInfo]:
        pipeline = self._pipeline()
        retriever = pipeline.retriever
        counts = ((retriever.describe().manifest if retriever is not None else None) or {}).get("counts", {})
        return [
            CollectionInfo(
                name=self.name,
                description=self.description,
                retriever=retriever.name if retriever is not None else None,
                generator=pipeline.engine.name,
                passages=counts.get("passages"),
            )
        ]

    def open(self, name: str) -> Collection:
        if name != self.name:
            raise UnknownCollection(f"unknown collection {name!r}; collections: {self.name}")
        return Collection(self.name, self._pipeline(), admit=self.admit)


# ------------------------------------------------------------------ what the tools return


class PassageOut(BaseModel):
    """A passage: numbered as an answer cites it ([n]) or as ranked by a search."""

    number: int
    id: str = Field(description="the passage id, '<document>#<n>'")
    title: str
    section: str = Field("", description="heading path inside the document")
    page: int | None = Field(None, description="PDF page the passage starts on")
    page_end: int | None = None
    link: str | None = Field(None, description="where to open the original at this passage, when known")
    text: str
    score: float

    @classmethod
    def of(cls, source: Source, link: str | None) -> "PassageOut":
        return cls(
            number=source.number, id=source.passage_id, title=source.title, section=source.section, page=source.page,
            page_end=source.page_end, link=link, text=source.text, score=source.score,
        )  # fmt: skip


class SearchOut(BaseModel):
    """What `search` returns: the passages, best first, and the engine that found them."""

    collection: str
    query: str
    retriever: str | None
    passages: list[PassageOut]


class CitationOut(BaseModel):
    """A sentence of the answer and the passages it cites."""

    text: str = Field(description="the sentence of the answer that cites")
    sources: list[int] = Field(description="the numbers of the passages it cites")
    passage_ids: list[str]


class TypeOut(BaseModel):
    """The question's type, as decided for the answer."""

    type: str = Field(description="the NF-CATS type the question was answered as, e.g. COMPARISON")
    confidence: float
    source: str = Field(description="classifier:<name>, forced, or llm:<model>")


class AspectOut(BaseModel):
    """One aspect of a typed plan: what it searched for and the sources it drew on."""

    label: str
    query: str
    sources: list[int]
    used: bool
    error: str | None = None


class TraceSummary(BaseModel):
    """What the answer's trace says, in brief: the plan, what was searched, the engines, the fallbacks."""

    strategy: str = Field(description="the plan that ran, e.g. comparison, or rag")
    plan_used: bool
    aspects: list[AspectOut]
    searched: list[str]
    engines: Engines
    llm_calls: int
    fallbacks: list[str] = Field(description="'step: reason' for each recorded fallback")
    abstention: str | None = Field(None, description="why the documents were judged not to answer")
    total_ms: float | None = None
    prompt_version: str


class AnswerOut(BaseModel):
    """What `answer` returns: the answer, its citations and sources, the type, the engine, the trace in brief."""

    collection: str
    question: str
    method: str
    answer: str
    abstained: bool
    type: TypeOut | None
    engine: str = Field(description="the engine that wrote the answer")
    citations: list[CitationOut]
    sources: list[PassageOut]
    trace: TraceSummary

    @classmethod
    def of(cls, collection: Collection, result: AnswerResult) -> "AnswerOut":
        decision = result.type
        return cls(
            collection=collection.name,
            question=result.question,
            method=result.method,
            answer=result.answer,
            abstained=result.abstained,
            type=TypeOut(type=decision.type, confidence=decision.confidence, source=decision.source)
            if decision
            else None,
            engine=result.engines.generator,
            citations=[
                CitationOut(text=c.text, sources=c.source_numbers, passage_ids=c.passage_ids) for c in result.citations
            ],
            sources=[PassageOut.of(s, collection.link(s)) for s in result.sources],
            trace=TraceSummary(
                strategy=result.strategy,
                plan_used=result.plan_used,
                aspects=[
                    AspectOut(label=a.label, query=a.query, sources=a.source_numbers, used=a.used, error=a.error)
                    for a in result.aspects
                ],
                searched=result.searched,
                engines=result.engines,
                llm_calls=result.usage.calls,
                fallbacks=[f"{f.step}: {f.reason}" for f in result.fallbacks],
                abstention=result.abstention.reason if result.abstention else None,
                total_ms=result.timings_ms.get("total"),
                prompt_version=result.prompt_version,
            ),
        )


def passage_lines(passages: list[PassageOut]) -> list[str]:
    lines = []
    for p in passages:
        where = " › ".join(part for part in (p.title, p.section) if part)
        if p.page is not None:
            where += f", p. {p.page}" + (f"–{p.page_end}" if p.page_end else "")
        lines.append(f"[{p.number}] {p.id}: {where}" + (f" <{p.link}>" if p.link else ""))
    return lines


def search_text(out: SearchOut) -> str:
    head = f"{len(out.passages)} passages from collection '{out.collection}' ({out.retriever}) for: {out.query}"
    body = [f"{line}\n{p.text}" for line, p in zip(passage_lines(out.passages), out.passages)]
    return "\n\n".join([head, *body])


def answer_text(out: AnswerOut) -> str:
    kind = f"{out.type.type} ({out.type.confidence:.2f}, {out.type.source})" if out.type else "not classified"
    trace = out.trace
    summary = (
        f"Type: {kind}; plan: {trace.strategy}{'' if trace.plan_used else ' (not used: fell back)'}; "
        f"engine: {out.engine}; retriever: {trace.engines.retriever}; LLM calls: {trace.llm_calls}"
        + (f"; {trace.total_ms:.0f} ms" if trace.total_ms is not None else "")
    )
    parts = [out.answer]
    if out.sources:
        parts.append("Sources:\n" + "\n".join(passage_lines(out.sources)))
    parts.append(summary)
    return "\n\n".join(parts)


# ------------------------------------------------------------------ the tools


def tool_error(message: str) -> Exception:
    """A tool error the client sees as one line (isError), not as a failure of the server."""
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(" ".join(message.split()))


def opened(collections: Collections, name: str) -> Collection:
    try:
        return collections.open(name)
    except UnknownCollection as error:
        raise tool_error(str(error)) from error


async def search(collections: Collections, query: str, collection: str, k: int) -> SearchOut:
    import anyio

    chosen = opened(collections, collection)
    retriever = chosen.pipeline.retriever
    if retriever is None:
        raise tool_error(f"collection {chosen.name!r} has no index to search")
    try:
        query = clean_question(query, chosen.pipeline.settings.max_question_chars)
        hits: list[ScoredPassage] = await anyio.to_thread.run_sync(retriever.search, query, k)
    except UserError as error:
        raise tool_error(str(error)) from error
    except IndexUnusableError as error:
        raise tool_error(f"the index is unusable: {error}") from error
    sources = [Source.of(number, hit) for number, hit in enumerate(hits, 1)]
    passages = [PassageOut.of(s, chosen.link(s)) for s in sources]
    return SearchOut(collection=chosen.name, query=query, retriever=retriever.name, passages=passages)


async def answer(collections: Collections, question: str, collection: str, method: str, type_: str | None) -> AnswerOut:
    chosen = opened(collections, collection)
    pipeline = chosen.pipeline
    try:
        question = clean_question(question, pipeline.settings.max_question_chars)
        forced = pipeline.route_label(type_) if type_ else None
        with chosen.admit():
            result = await pipeline.answer(question, method, forced)
    except LLMError as error:  # the details (upstream text, host:port) go to the log, not to the client
        log.warning("LLM endpoint failed", extra={"fields": {"error": str(error)}})
        raise tool_error("the LLM endpoint failed; see the server's log") from error
    except IndexUnusableError as error:
        raise tool_error(f"the index is unusable: {error}") from error
    except ModelUnavailable as error:
        raise tool_error(f"a model the engine needs cannot be loaded: {error}") from error
    except UserError as error:
        raise tool_error(str(error)) from error
    return AnswerOut.of(chosen, result)


def build_server(collections: Collections) -> "MCPServer":
    """The MCP server and its three tools over `collections`."""
    require("mcp.server", "mcp", FEATURE)
    from mcp.server import MCPServer
    from mcp_types import CallToolResult, TextContent, ToolAnnotations

    root = logging.getLogger()
    unconfigured = logging.NullHandler() if not root.handlers else None
    if unconfigured is not None:  # the SDK calls logging.basicConfig (rich, INFO) unless the root logger has a
        root.addHandler(unconfigured)  # handler: how a program logs is the program's to say
    try:
        server: MCPServer = MCPServer(
            "typedrag",
            version=__version__,
            instructions=(
                "Search and ask a team's documents. `answer` gives a cited answer ([n] refers to sources[n]) with "
                "the question's type and how it was answered; `search` gives the passages themselves."
            ),
        )
    finally:
        if unconfigured is not None:
            root.removeHandler(unconfigured)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def reply(text: str, data: BaseModel) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data.model_dump(mode="json")
        )

    @server.tool(annotations=read_only)
    def list_collections() -> Annotated[CallToolResult, CollectionsOut]:
        """The document collections this server searches and answers from."""
        out = CollectionsOut(collections=collections.list())
        lines = [f"{c.name}: {c.passages if c.passages is not None else '?'} passages, {c.retriever}, {c.generator}"
                 + (f" ({c.description})" if c.description else "") for c in out.collections]  # fmt: skip
        return reply("\n".join(lines), out)

    @server.tool(name="search", annotations=read_only)
    async def search_tool(
        query: Annotated[str, Field(description="what to look for, in words")],
        collection: Annotated[
            str, Field(description="the collection, as list_collections names it")
        ] = DEFAULT_COLLECTION,
        k: Annotated[int, Field(ge=1, le=MAX_PASSAGES, description="how many passages")] = 5,
    ) -> Annotated[CallToolResult, SearchOut]:
        """The passages of a collection that best match `query`, best first: each with its id, title, section,
        page and a link to the original where known."""
        out = await search(collections, query, collection, k)
        return reply(search_text(out), out)

    @server.tool(name="answer", annotations=read_only)
    async def answer_tool(
        question: Annotated[str, Field(description="the question, as a person would ask it")],
        collection: Annotated[
            str, Field(description="the collection, as list_collections names it")
        ] = DEFAULT_COLLECTION,
        method: Annotated[
            Literal["typed", "rag"],
            Field(description="typed: Typed-RAG (a plan for the question's type); rag: plain RAG"),
        ] = "typed",
        type: Annotated[
            str | None, Field(description="force the question type (e.g. comparison, debate); default: classify it")
        ] = None,
    ) -> Annotated[CallToolResult, AnswerOut]:
        """Answer a question from a collection's documents: the answer with [n] citations, its sources, the
        question's type, the engine that wrote it and a summary of how it was answered."""
        out = await answer(collections, question, collection, method, type)
        return reply(answer_text(out), out)

    return server


# ------------------------------------------------------------------ transports


async def serve_stdio(collections: Collections) -> None:
    """Serve the tools over this process's stdin and stdout until the client closes them."""
    await build_server(collections).run_stdio_async()


@dataclass
class HttpEndpoint:
    """The Streamable HTTP side of a server: an ASGI app for one route, and the context its sessions run in
    (entered for the web app's lifetime)."""

    app: Any  # ASGI
    running: Callable[[], AbstractAsyncContextManager[None]]


def http_endpoint(collections: Collections, max_body: int) -> HttpEndpoint:
    """The MCP server as an ASGI app to mount at one path. Stateless (no session kept between requests), and
    without the SDK's own Host-header check: the web app's TrustedHostMiddleware guards every route alike."""
    server = build_server(collections)
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings

    server.streamable_http_app(  # creates the session manager; the Starlette app it returns is not used
        stateless_http=True,
        max_request_body_size=max_body,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    manager = server.session_manager
    return HttpEndpoint(StreamableHTTPASGIApp(manager), manager.run)

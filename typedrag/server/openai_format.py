"""OpenAI's chat-completions protocol as typedrag speaks it, without I/O: a request in, what it asks for (or the
4xx saying why it cannot be honoured); an `AnswerResult` in, the completion or the stream's chunks out. The route
(typedrag.server.routes.openai) only reads the service and the request; everything here is tested alone.

The model name picks the method: `typedrag-typed`, `typedrag-rag`, `typedrag-llm`, or `typedrag-typed:<type>` to
force the question type, and `typedrag:<collection>` / `typedrag-rag:<collection>` to answer in a collection. The
last user message is the question and every message before it the conversation. The answer text ends with a plain
"Sources:" list for clients that show only text (or "Nearest passages, not an answer:" when the documents do not
answer), its control characters and bidi overrides shown as escapes (such clients often print to a terminal); the
full AnswerResult travels in the extension field `typedrag` of the response, or of the final chunk when streaming.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from typedrag.history import Turn
from typedrag.result import KNOWLEDGE, AnswerResult
from typedrag.server.error_bodies import api_error, error_body
from typedrag.text import for_terminal

MODELS = {"typedrag-typed": "typed", "typedrag-rag": "rag", "typedrag-llm": "llm"}
TYPED_PREFIX = "typedrag-typed:"  # + a route label forces the question type
# + a collection's name: Typed-RAG (typedrag:c) or plain RAG (typedrag-rag:c) in that collection
COLLECTION_MODELS = {"typedrag:": "typed", "typedrag-rag:": "rag"}
DONE = "data: [DONE]\n\n"


class ChatMessage(BaseModel):
    """One chat message: the last user message is the question, the messages before it its conversation."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    """An OpenAI chat-completions request; the model name picks the method (and may force a type)."""

    model_config = ConfigDict(extra="allow")  # temperature, max_tokens, ...: accepted and not used; see options_of

    model: str = Field(examples=["typedrag-typed"])
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None


# ---------------------------------------------------------------- the request


def model_entry(name: str, created: int) -> dict[str, Any]:
    """One model as /v1/models lists it."""
    return {"id": name, "object": "model", "created": created, "owned_by": "typedrag"}


def model_names(route_labels: list[str], collections: list[str], default_readable: bool) -> list[str]:
    """The models a caller may use: the plain and forced-type names when they may read the default collection
    (typedrag-llm, which reads no documents, always), and the two names of each collection they may read."""
    forced = [TYPED_PREFIX + label.lower() for label in route_labels] if default_readable else []
    plain = list(MODELS) if default_readable else [name for name, method in MODELS.items() if method == "llm"]
    return [*plain, *forced, *(prefix + name for name in collections for prefix in COLLECTION_MODELS)]


def method_of(model: str) -> tuple[str, str | None, str | None]:
    """(method, forced type or None, collection or None) named by a model name; 404 for a name that is not ours."""
    if model.startswith(TYPED_PREFIX):
        return "typed", model[len(TYPED_PREFIX) :], None
    if model in MODELS:
        return MODELS[model], None, None
    for prefix, method in COLLECTION_MODELS.items():
        if model.startswith(prefix) and len(model) > len(prefix):
            return method, None, model[len(prefix) :]
    raise api_error(
        404,
        f"unknown model {model!r}; use one of: {', '.join(MODELS)}, {TYPED_PREFIX}<type>, "
        f"or typedrag:<collection> / typedrag-rag:<collection>",
    )


def knowledge_of(extra: dict[str, Any]) -> str | None:
    """The request's `knowledge` (None: the server's setting), after refusing with a 400 what typedrag cannot
    honour: several choices, tools, a response format other than text, an unknown knowledge setting. The other
    extra fields (temperature, max_tokens, ...) are accepted and not used."""
    n = extra.get("n")
    if n is not None and (type(n) is not int or n != 1):  # True == 1 == 1.0 in Python: only the integer 1 is 1
        raise api_error(400, "typedrag returns one choice per request: n must be 1")
    used_tools = [name for name in ("tools", "tool_choice", "functions", "function_call") if extra.get(name)]
    if used_tools:
        raise api_error(400, f"typedrag does not call tools: remove {', '.join(used_tools)} from the request")
    shape = extra.get("response_format")
    if shape is not None and shape != {"type": "text"}:
        kind = shape.get("type") if isinstance(shape, dict) else shape
        raise api_error(
            400,
            f"typedrag answers in text with its sources, so response_format {kind!r} cannot be honoured: "
            "remove it (the structured result is the response's `typedrag` field)",
        )
    knowledge = extra.get("knowledge")
    if knowledge is not None and knowledge not in KNOWLEDGE:
        raise api_error(400, f"knowledge must be one of {', '.join(KNOWLEDGE)} (got {brief_value(knowledge)})")
    return knowledge


def brief_value(value: Any) -> str:
    """A client's value in an error message, short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def conversation_of(messages: list[ChatMessage]) -> tuple[str, list[Turn]]:
    """(the question: the last user message, the conversation before it). System and developer messages
    are instructions; other roles (tool results) and messages after the question are not part of it."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    if last is None:
        raise api_error(400, "no user message: the last message with role 'user' is the question")
    roles = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
    history = [
        Turn(role=roles[m.role], content=text) for m in messages[:last] if m.role in roles and (text := _text_of(m))
    ]
    return _text_of(messages[last]), history


def _text_of(message: ChatMessage) -> str:
    if isinstance(message.content, list):
        texts = [part.get("text") for part in message.content if part.get("type") == "text"]
        if not all(isinstance(text, str) for text in texts):
            raise api_error(400, "a message part of type 'text' needs a string 'text'")
        return " ".join(texts)
    return message.content or ""


# ---------------------------------------------------------------- the answer


def with_sources(result: AnswerResult, show: int = 5) -> str:
    """The answer, what the model added from its own knowledge (labelled, apart), and the passages it cites (or
    the top few if it cites none), for text-only clients."""
    return for_terminal(result.reply) + sources_list(result, show)


def unsourced_text(unsourced: dict[str, Any]) -> str:
    """The labelled part as it follows the streamed answer: a paragraph of its own."""
    return "\n\n" + for_terminal(unsourced["text"])


def sources_list(result: AnswerResult, show: int = 5) -> str:
    """The "Sources:" list that ends the text ("Nearest passages, not an answer:" when it abstained), or nothing.
    Many chat clients print text to a terminal, and titles and passage ids come from file names: each source stays
    on one line, its controls and bidi overrides escaped."""
    cited = {n for c in result.citations for n in c.source_numbers}
    listed = [s for s in result.sources if s.number in cited] or result.sources[:show]
    if not listed:
        return ""
    lines = "\n".join(for_terminal(" ".join(f"- [{s.number}] {s.title} ({s.passage_id})".split())) for s in listed)
    heading = "Nearest passages, not an answer:" if result.abstained else "Sources:"
    return f"\n\n{heading}\n{lines}"


def usage(result: AnswerResult) -> dict[str, int]:
    """Tokens the pipeline spent on its own LLM calls for this answer."""
    u = result.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    }


def completion(base: dict[str, Any], result: AnswerResult) -> dict[str, Any]:
    """The whole answer as a chat completion; `base` holds its id, created time and model."""
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": with_sources(result)},
        "finish_reason": "stop",
    }
    return {
        **base,
        "object": "chat.completion",
        "choices": [choice],
        "usage": usage(result),
        "typedrag": result.model_dump(mode="json"),
    }


@dataclass
class Chunks:
    """The streamed answer as chat-completion chunks (typedrag.server.answering.Renderer), each a `data:` line: a
    first chunk with the assistant's role, the text as content deltas as it is written, progress events as
    `typedrag_event: {"event", "data"}` on chunks with an empty delta, the sources, the final chunk carrying the
    AnswerResult as `typedrag`, then `data: [DONE]`.

    The token usage comes once: with `stream_options: {"include_usage": true}` in a last chunk with no choices, as
    OpenAI sends it; without, on the chunk that says `finish_reason: "stop"` (LangChain's ChatOpenAI asks only when
    `stream_usage=True`, yet reads usage from any chunk)."""

    base: dict[str, Any]  # the id, created time and model every chunk carries
    asked_for_usage: bool = False
    streamed: bool = field(default=False, init=False)  # some text went out already: the result adds only the sources

    def opening(self) -> list[str]:
        return [self.chunk({"role": "assistant", "content": ""})]

    def event(self, name: str, data: Any) -> list[str]:
        if name == "token":
            self.streamed = True
            return [self.chunk({"content": for_terminal(data["text"])})]
        if name == "unsourced":  # the model's own part follows the answer in the text, labelled
            self.streamed = True
            return [self.chunk({"content": unsourced_text(data)}, typedrag_event={"event": name, "data": data})]
        if name == "restart":  # deltas cannot be taken back: say so in the text itself
            return [
                self.chunk(
                    {"content": f"\n\n[{for_terminal(data['reason'])}]\n\n"},
                    typedrag_event={"event": name, "data": data},
                )
            ]
        return [self.chunk({}, typedrag_event={"event": name, "data": data})]

    def result(self, result: AnswerResult) -> list[str]:
        rest = sources_list(result) if self.streamed else with_sources(result)
        lines = [self.chunk({"content": rest})] if rest else []
        if self.asked_for_usage:  # OpenAI's way: one more chunk, with no choices, holding the usage
            lines.append(self.chunk({}, "stop", typedrag=result.model_dump(mode="json")))
            lines.append(
                data_line(
                    {**self.base, "object": "chat.completion.chunk", "choices": [], "usage": usage(result)},
                    ascii_only=True,
                )
            )
        else:  # not asked: on the last chunk
            lines.append(self.chunk({}, "stop", typedrag=result.model_dump(mode="json"), usage=usage(result)))
        return lines

    def error(self, status: int, message: Any) -> str:
        return data_line(error_body(status, str(message)), ascii_only=True)

    def closing(self) -> list[str]:
        return [DONE]

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            **self.base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return data_line(data)


def data_line(data: dict[str, Any], ascii_only: bool = False) -> str:
    """One server-sent `data:` line (the usage chunk and errors were always written with JSON's ASCII escapes)."""
    return f"data: {json.dumps(data, ensure_ascii=ascii_only)}\n\n"

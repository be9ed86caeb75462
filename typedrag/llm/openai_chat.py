"""Chat models behind any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, TGI, ...).

Transport concerns live in the official `openai` SDK: timeouts, and retries with exponential
backoff on 408/409/429/5xx and connection errors (honouring Retry-After). This class adds a
deadline over all attempts (a server that trickles bytes or asks to retry much later cannot stall
a call past it), the concurrency cap, the response cache, accounting, and the structured-output ladder:
JSON-schema `response_format` -> JSON mode -> plain text, then the tolerant parser, then one
repair retry that shows the model its own reply and the validation error. Plain replies can be
streamed (`on_text` hears each piece as it arrives; a cached reply is replayed in chunks).
A redirect is followed only on the endpoint's own origin (scheme, host and port): one to another
origin would carry the question and passages there, so the call fails and names where it pointed.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel

from typedrag import telemetry
from typedrag.llm.base import Completion, LLMCall, LLMError, Message
from typedrag.llm.cache import ResponseCache
from typedrag.llm.structured import REPAIR_INSTRUCTION, REPLY_CHARS, Checked, short as _short, validated, validator
from typedrag.errors import ConfigError
from typedrag.redact import host_of, install_log_redaction, redact_text, redact_url, url_problem
from typedrag.text import word_pieces

# The HTTP stack logs request URLs, userinfo included (openai 3.x ships its httpx as "httpx2").
install_log_redaction("httpx", "httpx2", "httpcore", "httpcore2", "openai")

__all__ = ["REPAIR_INSTRUCTION", "REPLY_CHARS", "OpenAIChatModel", "replay_chunks", "response_format"]

MAX_REPLY_CHARS = 100_000  # typedrag.config.LLMConfig.max_reply_chars
_CHAT = "/chat/completions"  # relative to the base URL, as the SDK's own `create` posts it
# Response-format modes tried in order until the endpoint accepts one.
_FORMAT_LADDER = ("json_schema", "json_object", "none")
_SURROGATE = re.compile(r"[\ud800-\udfff]")  # lone UTF-16 halves, decoded from "\ud800" escapes in a reply


class OpenAIChatModel:
    """A `ChatModel` on any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, TGI...).

    >>> OpenAIChatModel(model="llama3.1", base_url="http://127.0.0.1:11434/v1").name
    'openai-compatible:llama3.1@127.0.0.1:11434'
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_concurrency: int = 8,
        cache: ResponseCache | None = None,
        extra_body: dict[str, Any] | None = None,
        cache_identity: str | None = None,
        max_reply_chars: int = MAX_REPLY_CHARS,
    ) -> None:
        """`cache_identity` names the model in cache keys instead of the endpoint's URL (a local server's
        port changes every run; its model file does not). A reply longer than `max_reply_chars` is cut there."""
        self.model = model
        self.max_reply_chars = max_reply_chars
        self.base_url = base_url or "https://api.openai.com/v1"
        problem = url_problem(self.base_url)
        if problem:
            raise ConfigError(f"the model's base URL is {problem}")
        self.shown_url = redact_url(self.base_url)  # for messages: never the password in the URL
        self.name = f"openai-compatible:{model}@{host_of(self.base_url)}"
        self._secret = api_key or ""
        self._client_options = {
            "base_url": self.base_url,
            "api_key": api_key or "not-needed",  # local servers ignore it; the SDK insists on one
            "timeout": timeout,
            "max_retries": max_retries,
        }
        # Every attempt timing out, plus the SDK's backoff between attempts (0.5 s doubling, at most 8 s).
        self.deadline = timeout * (max_retries + 1) + sum(min(0.5 * 2**i, 8.0) for i in range(max_retries))
        self._max_concurrency = max_concurrency
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cache = cache
        self._cache_identity = cache_identity or self.shown_url
        self._extra_body = extra_body or {}
        # OpenAI enforces a schema only in strict mode, which takes a subset of JSON Schema; other servers
        # (llama.cpp, vLLM, Ollama) turn the whole schema, length limits included, into a grammar.
        self._strict_schemas = _is_openai(self.base_url)
        self._format_mode = 0  # index into _FORMAT_LADDER; advanced when the endpoint rejects a mode
        self._stream_usage = True  # ask streams for their token counts until the endpoint refuses

    async def complete(
        self,
        messages: list[Message],
        *,
        role: str,
        schema: type[BaseModel] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        accept: Callable[[str], bool] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """One completion. Only a usable reply is cached: for `schema` calls one that validated, for
        plain ones one that `accept` (if given) approves, so a reply that failed to parse is asked
        again next time instead of being replayed forever. `on_text` (plain replies only) streams
        the reply: it hears pieces that concatenate to the completion's text."""
        call = LLMCall(role=role, engine=self.name, requests=0)
        parsed = None
        with telemetry.llm_call(
            call,
            model=self.model,
            provider="openai",
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            structured=schema is not None,
            streaming=on_text is not None,
            server_url=self.base_url,
        ) as traced:
            if schema is None:
                text, _ = await self._ask(
                    messages, None, max_tokens, temperature, call, _approver(accept), on_text, traced
                )
            else:
                parsed, text = await self._validated(messages, schema, max_tokens, temperature, call, traced)
            traced.reply(text)
        return Completion(text=text, parsed=parsed, call=call)

    async def _validated(
        self,
        messages: list[Message],
        schema: type[BaseModel],
        max_tokens: int,
        temperature: float,
        call: LLMCall,
        traced: telemetry.ModelCall | None = None,
    ) -> tuple[BaseModel | None, str]:
        check = validator(schema)

        async def ask(turns: list[Message]) -> tuple[str, Checked]:
            return await self._ask(turns, schema, max_tokens, temperature, call, check, traced=traced)

        return await validated(ask, messages, schema, max_tokens, call)

    async def _ask(
        self,
        messages: list[Message],
        schema: type[BaseModel] | None,
        max_tokens: int,
        temperature: float,
        call: LLMCall,
        usable: Callable[[str], tuple[bool, Any]],
        on_text: Callable[[str], None] | None = None,
        traced: telemetry.ModelCall | None = None,
    ) -> tuple[str, tuple[bool, Any]]:
        """One request through the cache; the reply is stored only if `usable` approves it. A cached
        reply it rejects (stored by an older typedrag, which cached everything) is asked for afresh."""
        text, key, hit = await self._request(
            messages, schema, max_tokens, temperature, call, on_text=on_text, traced=traced
        )
        outcome = usable(text)
        if hit and not outcome[0]:
            text, key, hit = await self._request(
                messages, schema, max_tokens, temperature, call, False, on_text, traced
            )
            outcome = usable(text)
        if hit and on_text is not None:  # a cached reply streams too, so clients behave the same either way
            for piece in replay_chunks(text):
                on_text(piece)
        if outcome[0] and key is not None and not hit:
            self._cache.put(key, {"text": text, "finish_reason": call.finish_reason})
        return text, outcome

    async def _request(
        self,
        messages: list[Message],
        schema: type[BaseModel] | None,
        max_tokens: int,
        temperature: float,
        call: LLMCall,
        use_cache: bool = True,
        on_text: Callable[[str], None] | None = None,
        traced: telemetry.ModelCall | None = None,
    ) -> tuple[str, str | None, bool]:
        """(reply, cache key or None, whether it came from the cache); storing is the caller's choice.
        With `on_text` (plain replies) the request streams and `on_text` hears each piece; `traced` hears
        the response's id and model, for the call's span."""
        traced = traced or telemetry.ModelCall(None)
        while True:
            mode = _FORMAT_LADDER[self._format_mode] if schema is not None else "none"
            params: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": temperature,
            }
            if mode == "json_schema":
                params["response_format"] = response_format(schema, strict=self._strict_schemas)
            elif mode == "json_object":
                params["response_format"] = {"type": "json_object"}
            key = None
            if self._cache is not None:
                key = self._cache.key({"base_url": self._cache_identity, **params, "extra_body": self._extra_body})
                hit = self._cache.get(key) if use_cache else None
                if hit is not None:
                    call.cached = True
                    call.finish_reason = hit.get("finish_reason")
                    return hit["text"], key, True
            call.cached = False
            client, limit = self._bound_to_running_loop()
            waiting = time.perf_counter()
            try:
                async with limit:
                    started = time.perf_counter()
                    call.queued_ms = round(call.queued_ms + (started - waiting) * 1000, 1)
                    call.requests += 1
                    try:
                        async with asyncio.timeout(self.deadline), _Turn(self._sending):
                            if on_text is not None and schema is None:
                                text, usage, finish = await self._streamed(client, params, on_text, traced)
                            else:
                                response = await client.post(_CHAT, body=self._body(params), cast_to=ChatCompletion)
                                text, usage, finish = (
                                    self._clean(_content(response)),
                                    _usage(response),
                                    _finish(response),
                                )
                                traced.responded(getattr(response, "id", None), getattr(response, "model", None))
                                del response  # a reply of megabytes is not kept twice
                                text, finish = self._bounded(text, finish)
                    finally:
                        call.latency_ms = round(call.latency_ms + (time.perf_counter() - started) * 1000, 1)
            except openai.BadRequestError as error:
                if on_text is not None and self._stream_usage and "stream_options" in str(error):
                    self._stream_usage = False  # an older server: stream without the usage chunk
                    continue
                if mode != "none" and _mentions_format(error):
                    # The endpoint does not support this mode; try the next one (concurrent rejections move it once).
                    self._format_mode = max(self._format_mode, _FORMAT_LADDER.index(mode) + 1)
                    continue
                raise LLMError(f"{self.name} rejected the request: {self._redact(error)}") from error
            except ForeignRedirect as error:
                raise LLMError(f"{self.name}: {error}") from error
            except openai.APITimeoutError as error:
                raise LLMError(f"{self.name} timed out after retries") from error
            except TimeoutError as error:
                raise LLMError(f"{self.name} timed out: no complete reply within {self.deadline:.1f} s") from error
            except openai.APIConnectionError as error:
                raise LLMError(f"cannot reach {self.shown_url}: {self._redact(error)}") from error
            except openai.APIStatusError as error:
                raise LLMError(
                    f"{self.name} answered HTTP {error.status_code} after retries: {self._redact(error)}"
                ) from error
            except (openai.OpenAIError, ValueError) as error:  # a 200 whose body is not a chat completion
                raise LLMError(f"{self.name} sent a malformed response: {self._redact(error)}") from error
            prompt_tokens, completion_tokens = usage
            call.prompt_tokens += prompt_tokens
            call.completion_tokens += completion_tokens
            call.finish_reason = finish
            if not text.strip() and schema is None:
                raise LLMError(f"{self.name} returned an empty reply")
            return text, key, False

    def _body(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request's JSON body, posted as it is: the SDK's typed `create` walks every message through
        its parameter annotations before sending, CPU time that lies on the critical path when the aspect
        requests leave one after another from one event loop. Retries, auth and errors stay the SDK's."""
        return {**params, **self._extra_body}

    def _bounded(self, text: str, finish: str | None) -> tuple[str, str | None]:
        """`text` cut to `max_reply_chars`; the finish reason then says so (a trace shows it)."""
        if len(text) <= self.max_reply_chars:
            return text, finish
        return text[
            : self.max_reply_chars
        ], f"cut: {len(text):,} characters, over max_reply_chars {self.max_reply_chars:,}"

    def _clean(self, text: str) -> str:
        text = _SURROGATE.sub("\ufffd", text)  # "\ud800" escapes: cannot be sent on or printed
        if self._secret:  # a server that echoes the key must not put it into traces, the cache or a stream
            text = text.replace(self._secret, "***")
        return text

    async def _streamed(
        self,
        client: openai.AsyncOpenAI,
        params: dict[str, Any],
        on_text: Callable[[str], None],
        traced: telemetry.ModelCall,
    ) -> tuple[str, tuple[int, int], str | None]:
        """A streamed reply: each cleaned piece goes to `on_text` as it arrives. Leaving the `async with`
        (done, error or cancellation) closes the HTTP response, so a cancelled answer stops the server's work."""
        body = {**params, "stream": True, **({"stream_options": {"include_usage": True}} if self._stream_usage else {})}
        stream = await client.post(
            _CHAT,
            body=self._body(body),
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )
        pieces: list[str] = []
        received = 0
        held = ""  # the tail that might be the start of the API key, held until the next piece decides
        usage, finish = (0, 0), None
        async with stream:
            try:
                async for chunk in stream:
                    traced.responded(getattr(chunk, "id", None), getattr(chunk, "model", None))
                    if getattr(chunk, "usage", None) is not None:
                        usage = _usage(chunk)
                    for choice in getattr(chunk, "choices", None) or []:
                        finish = getattr(choice, "finish_reason", None) or finish
                        delta = getattr(getattr(choice, "delta", None), "content", None)
                        if isinstance(delta, str) and delta:
                            ready, held = self._release(held + delta)
                            room = self.max_reply_chars - received
                            if len(ready) > room:  # the rest is never read: leaving `async with` closes the stream
                                ready, held, finish = (
                                    ready[:room],
                                    "",
                                    f"cut: over max_reply_chars {self.max_reply_chars:,}",
                                )
                            if ready:
                                pieces.append(ready)
                                received += len(ready)
                                on_text(ready)
                    if finish is not None and finish.startswith("cut:"):
                        break
            except Exception as error:
                if not _broken_transport(error):
                    raise
                sent = sum(map(len, pieces))
                raise LLMError(
                    f"{self.name}: the reply stream broke off after {sent} characters: {self._redact(error)}"
                ) from error
        if held:  # a tail of cleaned text that did not turn out to be the key
            pieces.append(held)
            on_text(held)
        return "".join(pieces), usage, finish

    def _release(self, text: str) -> tuple[str, str]:
        """(the cleaned text safe to send now, the tail to hold): a key split across pieces is still masked."""
        text = self._clean(text)
        if not self._secret:
            return text, ""
        keep = next(
            (n for n in range(min(len(self._secret) - 1, len(text)), 0, -1) if self._secret.startswith(text[-n:])), 0
        )
        return (text[:-keep], text[-keep:]) if keep else (text, "")

    async def aclose(self) -> None:
        """Close the HTTP pool inside its own loop; left to garbage collection after that loop has
        closed, its sockets raise 'Event loop is closed' noise."""
        if self._loop is not None and self._loop is asyncio.get_running_loop():
            await self._client.close()
            self._loop = None

    def _bound_to_running_loop(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """The HTTP client and the cap for the running event loop.

        An async HTTP pool belongs to the loop it was opened in; one model object is reused across
        `asyncio.run` calls (CLI batches, tests, the server), so each new loop gets its own pool.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            hooks = {"request": [_hand_back_once_written], "response": [_same_origin_redirects(self.base_url)]}
            http = openai.DefaultAsyncHttpxClient(event_hooks=hooks)
            self._client = openai.AsyncOpenAI(**self._client_options, http_client=http)
            self._limit = asyncio.Semaphore(self._max_concurrency)
            self._sending = asyncio.Lock()
            self._loop = loop  # last: a client that failed to open leaves nothing for aclose() to close
        return self._client, self._limit

    def _redact(self, error: Exception) -> str:
        """Error text safe for logs and traces: the API key never appears, however the server echoes it."""
        text = str(error).replace(self._secret, "***") if self._secret else str(error)
        return _short(redact_text(text))


class _Turn:
    """A request's turn to be built and written, taken before it is built and handed back once its body
    is on the wire (or it ends). Requests started together on one event loop then leave whole, one after
    another; without turns each writes its headers, yields, and its body waits behind the building of
    every other request, so the first of five aspects reaches the server as late as the last."""

    def __init__(self, lock: asyncio.Lock) -> None:
        self._lock = lock
        self._held = False

    async def __aenter__(self) -> "_Turn":
        await self._lock.acquire()
        self._held = True
        self._token = _TURN.set(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        _TURN.reset(self._token)
        self.hand_back()

    def hand_back(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's `trace` extension: the body is written, or the attempt failed before it could be."""
        if event.endswith("send_request_body.complete") or event.endswith(".failed"):
            self.hand_back()


_TURN: contextvars.ContextVar[_Turn | None] = contextvars.ContextVar("typedrag_request_turn", default=None)


async def _hand_back_once_written(request: Any) -> None:
    """The HTTP client's request hook: the request being sent reports, through httpcore's trace, when
    its body has been written, and its turn goes to the next request."""
    turn = _TURN.get()
    if turn is not None:
        request.extensions["trace"] = turn.trace


class ForeignRedirect(openai.OpenAIError):
    """The endpoint redirected to another origin. An OpenAIError, so the SDK passes it on without retrying."""


def _same_origin_redirects(base_url: str) -> Callable[[Any], Awaitable[None]]:
    """The HTTP client's response hook: a redirect to an origin other than the endpoint's is refused
    before it is followed, as the request it would repeat there holds the question and passages."""
    home = _origin(base_url)

    async def check(response: Any) -> None:
        if not response.has_redirect_location:
            return
        try:
            target = str(response.url.join(response.headers["location"]))
            elsewhere, where = _origin(target) != home, host_of(target)
        except Exception:  # the HTTP library's InvalidURL, or a port that is no number: nowhere to follow
            elsewhere, where = True, "a location that is no valid URL"
        if elsewhere:
            raise ForeignRedirect(
                f"the endpoint redirected to another origin ({where}); not followed, as the request holds "
                "the question and passages: set the base URL to where the endpoint lives"
            )

    return check


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a URL, the port filled in for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def _broken_transport(error: Exception) -> bool:
    """A connection that failed mid-reply: openai 3 wraps the HTTP library's error, openai 2 lets it out
    of a stream as it is (httpx's own, from whichever of httpx or httpx2 the SDK has loaded)."""
    if isinstance(error, openai.APIConnectionError):
        return True
    libraries = (sys.modules.get(name) for name in ("httpx", "httpx2"))
    return any(isinstance(error, library.TransportError) for library in libraries if library is not None)


def replay_chunks(text: str, words: int = 3) -> list[str]:
    """A finished reply cut into pieces of a few words that concatenate back to it, for replaying a cache hit."""
    tokens = word_pieces(text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]


def _approver(accept: Callable[[str], bool] | None) -> Callable[[str], tuple[bool, Any]]:
    def usable(text: str) -> tuple[bool, Any]:
        if accept is None:
            return True, None
        try:
            return bool(accept(text)), None
        except Exception:  # a checker that chokes on a reply means the reply is unusable
            return False, None

    return usable


def _content(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _finish(response: Any) -> str | None:
    try:
        reason = response.choices[0].finish_reason
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return reason if isinstance(reason, str) else None


def response_format(schema: type[BaseModel], *, strict: bool) -> dict[str, Any]:
    """The `response_format` that asks the endpoint to decode only replies of `schema`.

    llama.cpp, vLLM and Ollama compile the whole JSON schema (item and length limits included) into a
    grammar. OpenAI enforces a schema only with `strict`, which needs every property required and no
    others allowed, and refuses string length limits: those are left to our validation.
    """
    spec: dict[str, Any] = {"name": schema.__name__, "schema": json.loads(_schema_json(schema, strict))}
    if strict:
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


@functools.lru_cache(maxsize=64)
def _schema_json(schema: type[BaseModel], strict: bool) -> str:
    """A plan schema as JSON, built once (pydantic builds it anew on every call, and a plan request waits
    for it); callers get a fresh copy each time, free to change."""
    body = schema.model_json_schema()
    return json.dumps(_strict(body) if strict else body)


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {
        key: _strict(value) for key, value in node.items() if key not in ("minLength", "maxLength", "default", "title")
    }
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    return node


def _is_openai(url: str) -> bool:
    try:
        return urlsplit(url).hostname == "api.openai.com"
    except ValueError:
        return False


def _usage(response: Any) -> tuple[int, int]:
    """(prompt, completion) tokens, or zeros when the server reports none or nonsense."""
    usage = getattr(response, "usage", None)
    counts = (getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))
    return tuple(n if isinstance(n, int) else 0 for n in counts)


def _mentions_format(error: openai.BadRequestError) -> bool:
    text = str(error).lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object", "response format", "grammar"))

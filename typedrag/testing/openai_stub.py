"""A real HTTP server on loopback that speaks the OpenAI chat-completions protocol, scripted in Python.

Tests and benchmarks drive typedrag's LLM path through actual HTTP (the official SDK, retries,
timeouts, response_format) instead of patching our own functions. A `responder` decides each
reply; the default one returns schema-valid plans and cited answers, optionally after a delay.
A request with `"stream": true` gets Server-Sent Events: the first token after `first_token_delay`,
then one whitespace-delimited token every 1/`token_rate` seconds, as a real server trickles them.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from typedrag.text import word_pieces

POLL_SECONDS = 0.02  # how often a server's loop looks for shutdown()


@dataclass
class ChatRequest:
    """A request the stub server received: its JSON body and headers, with helpers to read the prompt."""

    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def prompt(self) -> str:
        return "\n".join(m.get("content", "") for m in self.messages)

    @property
    def last_user(self) -> str:
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    @property
    def schema_name(self) -> str | None:
        fmt = self.body.get("response_format") or {}
        return (fmt.get("json_schema") or {}).get("name")

    @property
    def question(self) -> str:
        match = re.search(r"(?:Debated question|Question|The reader's question is): (.+)", self.last_user)
        return match.group(1).strip() if match else self.last_user


@dataclass
class Reply:
    """What the stub sends back: content, status, delay, or a broken response (raw bytes, a drop, a drip)."""

    content: str | None = ""
    status: int = 200
    delay: float = 0.0  # seconds to sleep before answering
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # send these bytes as the body instead of a completion
    drop: bool = False  # close the connection without answering
    drip: float = 0.0  # send the body one byte at a time, this many seconds apart (a stalled stream)
    break_after: int | None = None  # streamed: drop the connection after this many tokens
    pieces: list[str] | None = None  # streamed: send exactly these deltas (default: the content word by word)
    finish_reason: str = "stop"  # "length": the reply was cut at max_tokens, as a server says it
    # streamed: after `hold_after` pieces the stream waits until `hold` is set (a reply still being written, for
    # as long as a test needs: what happens meanwhile is observed by events, never by timing)
    hold: threading.Event | None = None
    hold_after: int = 1


Responder = Callable[[ChatRequest], Reply]


_FALLBACK_PLANS = {
    "ComparisonPlan": lambda q: {"purpose": "difference", "items": ["first thing", "second thing"]},
    "ExperiencePlan": lambda q: {"topic": q[:60], "keywords": q.split()[:3] or ["topic"]},
    "SubQueryPlan": lambda q: {"sub_queries": [f"{q} causes", f"{q} background"]},
    "DebatePlan": lambda q: {
        "topic": q[:60],
        "perspectives": [
            {"name": "supporters", "sub_query": f"support {q}"},
            {"name": "critics", "sub_query": f"against {q}"},
        ],
    },
    "TypeVerdict": lambda q: {"type": "EVIDENCE-BASED"},
    "StandaloneQuestion": lambda q: {"question": q},  # the last question, unchanged
    "Weighing": lambda q: {"leaning": "balanced", "side": "", "reason": ""},  # a debate's sources leave it open
    "Expansion": lambda q: {"rewrite": q[:200], "passage": q[:700]},  # searches what the question does
}


def plan_for(schema_name: str, prompt: str) -> str:
    """A schema-valid plan for the question in `prompt`: the offline planner of the default strategy with
    that schema (Reason's for SubQueryPlan), else a generic plan of the right shape."""
    from typedrag.strategies import default_routes

    match = re.search(r"(?:Debated question|Last question|Question|The reader's question is): (.+)", prompt)
    question = match.group(1).strip() if match else prompt
    planners = {}
    for strategy in reversed(list(default_routes().values())):
        task = getattr(strategy, "plan", None)
        if task is not None and task.offline is not None:
            planners[task.schema.__name__] = task.offline
    if schema_name in planners:
        try:
            return planners[schema_name](question).model_dump_json()
        except ValueError:
            pass
    return json.dumps(_FALLBACK_PLANS[schema_name](question))


def candidates(prompt: str) -> dict[str, str]:
    """The answers a pairwise judge prompt shows, by label: {"A": ..., "B": ...}."""
    return dict(re.findall(r'<candidate label="(\w)">\n(.*?)\n</candidate>', prompt, re.S))


def reading(answer: str) -> dict[str, Any]:
    """The stub judge's reading of one answer: its cited sentences answer, its uncited ones are noise."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", answer.strip()) if s]
    cited = sum(bool(re.search(r"\[\d+\]", s)) for s in sentences)
    return {"satisfies": cited > 0, "answering": cited, "noise": len(sentences) - cited}


def pair_verdict(prompt: str) -> str:
    """A schema-valid pairwise verdict: the answer with more cited sentences wins, an even count ties."""
    shown = candidates(prompt)
    readings = {label: reading(shown.get(label, "")) for label in "AB"}
    a, b = readings["A"]["answering"], readings["B"]["answering"]
    winner = "A" if a > b else "B" if b > a else "tie"
    return json.dumps(
        {
            "answer_a": readings["A"],
            "answer_b": readings["B"],
            "reason": f"cited sentences {a} vs {b}",
            "winner": winner,
        }
    )


def written_questions(prompt: str) -> str:
    """Schema-valid questions for `eval questions`: one per asked type, about the first passage's title."""
    asked = re.search(r"Write (\d+) questions? of this kind", prompt)
    count = int(asked.group(1)) if asked else 1
    titles = re.findall(r"^\[(\d+)\] ([^:\n]+)", prompt, re.M) or [("1", "the documents")]
    kind = re.search(r"Kind: (\w[\w-]*)", prompt)
    opening = {
        "REASON": "Why does",
        "INSTRUCTION": "How do I use",
        "COMPARISON": "How does",
        "EXPERIENCE": "Any tips for",
        "DEBATE": "Is it a good idea to rely on",
        "EVIDENCE-BASED": "What is",
    }.get(kind.group(1) if kind else "", "What is")
    tag = hashlib.sha256(prompt.encode()).hexdigest()[:6]  # another prompt, other questions
    rows = [
        {
            "question": f"{opening} {titles[i % len(titles)][1].strip()} (question {i + 1} of {tag})?",
            "passage": int(titles[i % len(titles)][0]),
        }
        for i in range(count)
    ]
    return json.dumps({"questions": rows})


_JUDGE_REPLIES = {"PairVerdict": pair_verdict, "WrittenQuestions": written_questions}


def default_content(request: ChatRequest) -> str:
    """A plausible, schema-valid reply for any typedrag prompt."""
    name = request.schema_name or _schema_from_prompt(request.prompt)
    if name in _JUDGE_REPLIES:
        return _JUDGE_REPLIES[name](request.last_user)
    if name in _FALLBACK_PLANS:
        return plan_for(name, request.last_user)
    question = request.question
    numbers = re.findall(r'<source id="(\d+)"', request.last_user) or re.findall(r"\[(\d+)\]", request.last_user)
    cite = f" [{numbers[0]}]" if numbers else ""
    if "judge" in request.prompt.lower() and "[[" in request.prompt:
        return "Rank: [[2]]"
    if name == "LabelledAnswer":  # knowledge = "labelled": the answer from the sources, nothing of its own
        return json.dumps(
            {"from_sources": f"Stub answer to: {question[:80]}{cite}.", "not_covered": "", "from_own_knowledge": []}
        )
    focus = re.search(
        r"(?:Answer only this part of it: |as seen by )(.+?)(?:, using the sources)?\.?\n", request.last_user + "\n"
    )
    if focus:  # an aspect: about its own focus, so aspects do not repeat each other
        return f"Stub answer about {focus.group(1)[:80]}{cite}."
    return f"Stub answer to: {question[:80]}{cite}."


def _schema_from_prompt(prompt: str) -> str | None:
    markers = (
        ('"from_sources"', "LabelledAnswer"),
        ('"winner"', "PairVerdict"),
        ('"questions": [', "WrittenQuestions"),
        ('"purpose"', "ComparisonPlan"),
        ('"keywords"', "ExperiencePlan"),
        ('"sub_queries"', "SubQueryPlan"),
        ('"leaning"', "Weighing"),
        ('"rewrite"', "Expansion"),
        ('"perspectives"', "DebatePlan"),
        ('"type"', "TypeVerdict"),
        ("Last question:", "StandaloneQuestion"),
    )
    for marker, name in markers:
        if marker in prompt:
            return name
    return None


def default_responder(request: ChatRequest) -> Reply:
    return Reply(content=default_content(request))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # load tests open many connections at once; the default 5 drops bursts


class OpenAIStubServer:
    """Context manager: `with OpenAIStubServer(responder) as server: server.base_url ...`."""

    def __init__(
        self,
        responder: Responder = default_responder,
        *,
        delay: float = 0.0,
        model: str = "stub-model",
        first_token_delay: float | None = None,
        token_rate: float = 0.0,
    ) -> None:
        """`delay` is the latency of a whole reply; a streamed reply sends its first token after
        `first_token_delay` (default: `delay`) and then `token_rate` tokens a second (0: all at once)."""
        self.responder = responder
        self.delay = delay
        self.model = model
        self.first_token_delay = delay if first_token_delay is None else first_token_delay
        self.token_rate = token_rate
        self.requests: list[ChatRequest] = []
        self.open_streams = 0  # streamed replies being written right now
        self.abandoned_streams = 0  # streamed replies the client closed before the end
        self.waiting = 0  # requests waiting out their latency right now
        self.most_waiting = 0  # the most that ever waited at once: how many calls the client had in flight together
        self._lock = threading.Lock()
        self._over = threading.Event()  # set by reset(): replies of the test that is over stop waiting
        self._server = _Server(("127.0.0.1", 0), self._handler())
        # serve_forever looks for shutdown() every poll interval: the default half second was most of what
        # starting and stopping one cost (0.5 s a server, a test run starts a hundred)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(POLL_SECONDS,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "OpenAIStubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(
        self,
        responder: Responder | None = None,
        *,
        delay: float = 0.0,
        first_token_delay: float | None = None,
        token_rate: float = 0.0,
    ) -> "OpenAIStubServer":
        """Serve the next test afresh on the same port: a new responder and latency, no request or stream
        remembered. A reply still waiting out the last test's latency, drip, token rate or `hold` is cut
        short (its client has gone), so nothing of that test reaches this one."""
        self._over.set()
        for _ in range(3000):  # until the last test's handlers are done: at most 30 s, each cut short at once
            with self._lock:
                if self.waiting == 0 and self.open_streams == 0:
                    break
            time.sleep(0.01)
        self._over.clear()
        self.responder = responder or default_responder
        self.delay = delay
        self.first_token_delay = delay if first_token_delay is None else first_token_delay
        self.token_rate = token_rate
        with self._lock:
            self.requests.clear()
            self.abandoned_streams = 0
            self.most_waiting = self.waiting
        return self

    def _released(self, hold: threading.Event) -> bool:
        """Wait until the test lets a held reply go on (True), or is over (False: reset() moved on without it)."""
        while not hold.wait(0.05):
            if self._over.is_set():
                return False
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes; without this, Nagle + delayed ACK add ~40 ms per call.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None, drip: float = 0.0) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                try:
                    self.end_headers()
                    for chunk in [body[i : i + 1] for i in range(len(body))] if drip else [body]:
                        self.wfile.write(chunk)
                        if stub._over.wait(drip):
                            break
                except OSError:  # the client gave up (timed out) before the reply was written
                    self.close_connection = True

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    body = {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "stub"}]}
                    self._send(200, json.dumps(body).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, b'{"error": {"message": "invalid JSON"}}')
                    return
                request = ChatRequest(body=body, headers={k.lower(): v for k, v in self.headers.items()})
                with stub._lock:
                    stub.requests.append(request)
                    stub.waiting += 1
                    stub.most_waiting = max(stub.most_waiting, stub.waiting)
                try:
                    reply = stub.responder(request)
                    streamed = bool(body.get("stream")) and reply.status == 200 and reply.raw is None and not reply.drop
                    wait = (stub.first_token_delay if streamed else stub.delay) + reply.delay
                    if wait:
                        stub._over.wait(wait)
                finally:
                    with stub._lock:
                        stub.waiting -= 1
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if reply.raw is not None:
                    self._send(reply.status, reply.raw, reply.headers)
                    return
                if reply.status != 200:
                    error = {"error": {"message": reply.content or f"status {reply.status}", "type": "stub_error"}}
                    self._send(reply.status, json.dumps(error).encode(), reply.headers)
                    return
                if streamed:
                    self._stream(body, request, reply)
                    return
                prompt_tokens = sum(len(m.get("content", "").split()) for m in request.messages)
                completion = {
                    "id": f"chatcmpl-stub-{len(stub.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", stub.model),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": reply.finish_reason,
                            "message": {"role": "assistant", "content": reply.content},
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": len((reply.content or "").split()),
                        "total_tokens": prompt_tokens + len((reply.content or "").split()),
                    },
                }
                self._send(200, json.dumps(completion).encode(), reply.headers, reply.drip)

            def _stream(self, body: dict[str, Any], request: ChatRequest, reply: Reply) -> None:
                """The reply as chat.completion.chunk events in HTTP chunked encoding, trickled at the stub's rate."""
                base = {
                    "id": f"chatcmpl-stub-{len(stub.requests)}",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": body.get("model", stub.model),
                }

                def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
                    data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
                    return f"data: {json.dumps(data)}\n\n".encode()

                tokens = reply.pieces if reply.pieces is not None else word_pieces(reply.content or "")
                prompt_tokens = sum(len(m.get("content", "").split()) for m in request.messages)
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": len(tokens),
                    "total_tokens": prompt_tokens + len(tokens),
                }
                events = [event({"role": "assistant", "content": ""})]
                events += [event({"content": token}) for token in tokens]
                events.append(event({}, reply.finish_reason))
                if (body.get("stream_options") or {}).get("include_usage"):
                    events.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode())
                events.append(b"data: [DONE]\n\n")
                with stub._lock:
                    stub.open_streams += 1
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for n, data in enumerate(events):
                        if reply.hold is not None and n == 1 + reply.hold_after and not stub._released(reply.hold):
                            self.close_connection = True  # the test is over and never let it go: left unfinished
                            return
                        if 1 < n <= len(tokens) and stub.token_rate:
                            stub._over.wait(1 / stub.token_rate)
                        if reply.break_after is not None and n > reply.break_after:
                            self.close_connection = True
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:  # the client closed the stream
                    self.close_connection = True
                    with stub._lock:
                        stub.abandoned_streams += 1
                finally:
                    with stub._lock:
                        stub.open_streams -= 1

        return Handler

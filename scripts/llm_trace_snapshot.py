"""The LLM path's traces on the loopback stub's scenarios, as JSON lines: to check that a change to the code
behind the answers leaves their spans and recorded fallbacks the same.

Each scenario answers one question through real HTTP to typedrag.testing.openai_stub (every type, the two
baselines, a plan that fails, an aspect that fails, an aggregator that fails, a model that says its sources
do not answer, for the answer and for one aspect, a stream, a stream that breaks, a follow-up) with an
OpenTelemetry TracerProvider exporting to memory. A line holds, per scenario: every span as (name, parent's
name, role), sorted (concurrent steps end in any order); the fallbacks, sorted by step and reason likewise;
the roles of the LLM calls, sorted; the strategy that answered, whether it abstained, and the events a
streaming client heard, by name. Run it on two checkouts and diff:

    PYTHONPATH=/path/to/old python scripts/llm_trace_snapshot.py > old.jsonl
    PYTHONPATH=/path/to/new python scripts/llm_trace_snapshot.py > new.jsonl
    diff old.jsonl new.jsonl && echo identical
"""

from __future__ import annotations

import asyncio
import json
import re

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from typedrag import ListRetriever, Pipeline
from typedrag.engines.llm_engine import LLMEngine
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

TEXTS = [
    "Crocodiles have a V-shaped, pointed snout, while alligators have a wider U-shaped snout.",
    "Alligators live mainly in fresh water in the south-eastern United States and in China.",
    "Heavy taxation of the Roman provinces drained the economy of the Western Roman Empire.",
    "Germanic invasions across the Rhine and Danube frontiers broke the Western Roman Empire's defences.",
    "Political instability and repeated civil wars weakened the Western Roman Empire's central government.",
    "To bake bread, first mix flour, water, salt and yeast into a dough, then knead it for ten minutes.",
    "Let the dough rise in a warm place until it doubles in size, then bake it in a hot oven.",
    "Supporters of nuclear power argue that it produces electricity with very low carbon emissions.",
    "Critics of nuclear power point to the risk of accidents and the problem of long-lived radioactive waste.",
    "Beginners learning guitar are usually advised to practise for short periods every day.",
    "Photosynthesis is the process by which green plants use sunlight, water and carbon dioxide to make sugar.",
    "RMS Titanic was a British ocean liner; she carried twenty lifeboats, too few for everyone on board.",
]
QUESTIONS = {
    "evidence-based": "How does photosynthesis work?",
    "comparison": "What is the difference between a crocodile and an alligator?",
    "experience": "Any advice for a beginner learning guitar?",
    "reason": "Why did the Western Roman Empire fall?",
    "instruction": "How do I bake bread at home?",
    "debate": "Should countries build more nuclear power plants?",
}


def default(request) -> Reply:
    return Reply(content=default_content(request))


def failing_at(marker: str, reply: Reply):
    """The default replies, but `reply` to a request whose prompt holds `marker`."""
    return lambda request: reply if marker in request.prompt else default(request)


def plan_reply(content: str):
    return lambda request: Reply(content=content) if request.schema_name else default(request)


def aspect_not_in_sources(request):
    if (
        "Answer only this part of it" in request.last_user
        and "causes" in request.last_user.split("Answer only this part of it")[1]
    ):
        return Reply(content='{"not_in_sources": "the causes"}')
    return default(request)


def streams_break(state: dict):
    def responder(request):
        if request.body.get("stream"):
            state["streams"] = state.get("streams", 0) + 1
            if state["streams"] == 1:
                return Reply(content="Taxes rose [1] and then the", break_after=3)
        return default(request)

    return responder


SCENARIOS = [
    *[
        (f"typed:{kind}", default, dict(question=question, method="typed", forced_type=kind))
        for kind, question in QUESTIONS.items()
    ],
    ("rag", default, dict(question=QUESTIONS["evidence-based"], method="rag")),
    ("llm", default, dict(question="Why is the sky blue?", method="llm")),
    (
        "plan fails",
        plan_reply("no plan, just prose"),
        dict(question=QUESTIONS["debate"], method="typed", forced_type="debate"),
    ),
    (
        "aspect fails",
        failing_at("Answer only this part of it", Reply(status=500, content="down")),
        dict(question=QUESTIONS["reason"], method="typed", forced_type="reason"),
    ),
    (
        "aggregator fails",
        failing_at("Partial answers", Reply(status=500, content="down")),
        dict(question=QUESTIONS["reason"], method="typed", forced_type="reason"),
    ),
    (
        "not in sources",
        failing_at("Question: Which band", Reply(content='{"not_in_sources": "the band"}')),
        dict(question="Which band played on the Titanic?", method="rag"),
    ),
    (
        "aspect not in sources",
        aspect_not_in_sources,
        dict(question=QUESTIONS["reason"], method="typed", forced_type="reason"),
    ),
    (
        "streamed",
        default,
        dict(question=QUESTIONS["instruction"], method="typed", forced_type="instruction", stream=True),
    ),
    ("stream breaks", None, dict(question=QUESTIONS["reason"], method="typed", forced_type="reason", stream=True)),
    (
        "follow-up",
        lambda r: (
            Reply(content=json.dumps({"question": "How many lifeboats did the Titanic carry?"}))
            if r.schema_name == "StandaloneQuestion"
            else default(r)
        ),
        dict(
            question="How many lifeboats did it carry?",
            method="rag",
            history=[
                {"role": "user", "content": "Tell me about the Titanic."},
                {"role": "assistant", "content": "A liner [1]."},
            ],
        ),
    ),
]


async def scenario(name, responder, ask, exporter) -> dict:
    exporter.clear()
    responder = responder or streams_break({})
    events: list[str] = []
    with OpenAIStubServer(responder) as server:
        model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0, timeout=30)
        pipeline = Pipeline(LLMEngine(model), ListRetriever(TEXTS))
        kwargs = {k: v for k, v in ask.items() if k != "stream"}
        if ask.get("stream"):
            kwargs["on_event"] = lambda event, data: events.append(event)
        result = await pipeline.answer(**kwargs)
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    shape = sorted(
        (
            re.sub(r"^chat .*", "chat", s.name),
            re.sub(r"^chat .*", "chat", by_id[s.parent.span_id].name)
            if s.parent is not None and s.parent.span_id in by_id
            else "",
            str(s.attributes.get("typedrag.role", "")),
        )
        for s in spans
    )
    return {
        "scenario": name,
        "spans": shape,
        "fallbacks": sorted(
            (f.step, re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", f.reason)) for f in result.fallbacks
        ),
        "llm_calls": sorted(c.role for c in result.llm_calls),
        "strategy": result.strategy,
        "abstained": result.abstained,
        "events": sorted(set(events)),
    }


async def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    for name, responder, ask in SCENARIOS:
        print(json.dumps(await scenario(name, responder, ask, exporter), sort_keys=True), flush=True)


if __name__ == "__main__":
    asyncio.run(main())

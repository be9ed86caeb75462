"""Soak Typed-RAG with a real tiny model: SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server.

Runs 36 questions (six per NFQ type, type forced) over an index of the demo corpus, one llama.cpp
thread, temperature 0 and small token budgets, and prints per type: how many completed (an answer,
or a clear error), the structured-output outcomes of the plan calls, the fallback rate and the mean
latency. The model is far too small to plan well; the point is that every question still ends in
an answer or a recorded degradation, never a crash or a hang.

    python scripts/soak_smollm2.py [--index DIR] [--per-type N]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from typedrag.engines.llm_engine import LLMEngine
from typedrag.factory import smollm2_path
from typedrag.index import build_index, open_retriever
from typedrag.llm.local_server import LocalLlamaServer
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.nfq import NON_FACTOID_TYPES, NFQType
from typedrag.pipeline import Pipeline

QUESTIONS: dict[NFQType, list[str]] = {
    NFQType.EVIDENCE_BASED: [
        "What is photosynthesis?",
        "What was the Renaissance?",
        "What does the United Nations do?",
        "What is a black hole?",
        "What is the function of the heart?",
        "What is inflation in economics?",
    ],
    NFQType.COMPARISON: [
        "What is the difference between a virus and a bacterium?",
        "How does Buddhism differ from Hinduism?",
        "Which is larger, Jupiter or Saturn?",
        "What is the difference between weather and climate?",
        "How are crocodiles and alligators different?",
        "Is nuclear power or solar power better for the environment?",
    ],
    NFQType.EXPERIENCE: [
        "What is the best way to learn to play the piano?",
        "Any tips for a first visit to Rome?",
        "What should I know before adopting a dog?",
        "How can I get better at chess?",
        "What advice would you give someone starting to paint?",
        "What is it like to climb Mount Everest?",
    ],
    NFQType.REASON: [
        "Why did the Roman Empire fall?",
        "Why is the sky blue?",
        "Why did the First World War start?",
        "Why do volcanoes erupt?",
        "Why did the dinosaurs go extinct?",
        "Why is the Amazon rainforest important?",
    ],
    NFQType.INSTRUCTION: [
        "How do I bake bread?",
        "How do you make paper?",
        "How do I start learning a new language?",
        "How is steel made?",
        "How do you grow tomatoes?",
        "How do I take care of a cat?",
    ],
    NFQType.DEBATE: [
        "Should countries build more nuclear power plants?",
        "Was the Industrial Revolution good for humanity?",
        "Should zoos exist?",
        "Is capitalism better than socialism?",
        "Should the death penalty be abolished?",
        "Is social media good for society?",
    ],
}


@dataclass
class Outcome:
    kind: NFQType
    question: str
    seconds: float
    completed: bool  # a result with an answer or a recorded degradation (not an exception, not a silent blank)
    answered: bool
    fallbacks: int = 0
    structured: Counter = field(default_factory=Counter)
    error: str = ""  # the exception, or the first recorded degradation


def smollm2_model(*, timeout: float = 120.0) -> tuple[OpenAIChatModel, LocalLlamaServer]:
    server = LocalLlamaServer(smollm2_path(), n_ctx=4096, threads=1)
    model = OpenAIChatModel(model=server.model_name, base_url=server.base_url, timeout=timeout, max_retries=1)
    return model, server


async def ask(pipeline: Pipeline, kind: NFQType, question: str) -> Outcome:
    started = time.perf_counter()
    try:
        result = await pipeline.answer(question, "typed", kind)
    except Exception as error:  # noqa: BLE001 - the soak counts every failure instead of stopping at the first
        return Outcome(
            kind, question, time.perf_counter() - started, False, False, error=f"{type(error).__name__}: {error}"
        )
    structured = Counter(c.structured.value for c in result.llm_calls if c.structured is not None)
    degraded = bool(result.fallbacks) or any(a.error for a in result.aspects)
    answered = bool(result.answer.strip())
    note = f"{result.fallbacks[0].step}: {result.fallbacks[0].reason}" if result.fallbacks else ""
    seconds = time.perf_counter() - started
    return Outcome(kind, question, seconds, answered or degraded, answered, len(result.fallbacks), structured, note)


async def soak(pipeline: Pipeline, questions: dict[NFQType, list[str]], echo: bool = False) -> list[Outcome]:
    outcomes = []
    for kind, items in questions.items():
        for question in items:
            outcome = await ask(pipeline, kind, question)
            outcomes.append(outcome)
            if echo:
                status = "ok" if outcome.completed else "CRASH"
                print(
                    f"{kind.value:<15} {outcome.seconds:6.1f} s  {status:<5} {question}  {outcome.error[:110]}",
                    flush=True,
                )
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    header = f"{'type':<15} {'n':>3} {'completed':>9} {'answered':>8} {'plan ok/repaired/failed':>24} {'fallback rate':>13} {'mean latency':>12}"
    lines = [header, "-" * len(header)]
    groups = [(kind.value, [o for o in outcomes if o.kind is kind]) for kind in NON_FACTOID_TYPES]
    for name, group in [*groups, ("all", outcomes)]:
        if not group:
            continue
        s = sum((o.structured for o in group), Counter())
        plan = "-" if name == NFQType.EVIDENCE_BASED.value else f"{s['ok']}/{s['repaired']}/{s['failed']}"
        fallback_rate = sum(o.fallbacks > 0 for o in group) / len(group)
        mean = sum(o.seconds for o in group) / len(group)
        lines.append(
            f"{name:<15} {len(group):>3} {sum(o.completed for o in group):>9} {sum(o.answered for o in group):>8} "
            f"{plan:>24} {fallback_rate:>13.0%} {mean:>10.1f} s"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, help="an index to reuse [default: build one of demo:vital-articles]")
    parser.add_argument("--per-type", type=int, default=6, help="questions per type (at most 6)")
    parser.add_argument("--answer-tokens", type=int, default=96)
    parser.add_argument("--plan-tokens", type=int, default=96)
    args = parser.parse_args()
    questions = {kind: items[: args.per_type] for kind, items in QUESTIONS.items()}
    with tempfile.TemporaryDirectory() as scratch:
        index_dir = args.index
        if index_dir is None:
            index_dir = Path(scratch) / "index"
            build_index(["demo:vital-articles"], index_dir, show_progress=False)
        model, server = smollm2_model()
        try:
            engine = LLMEngine(model, answer_tokens=args.answer_tokens, plan_tokens=args.plan_tokens)
            started = time.perf_counter()
            outcomes = asyncio.run(soak(Pipeline(engine, open_retriever(index_dir)), questions, echo=True))
        finally:
            server.close()
    print(f"\n{len(outcomes)} questions in {time.perf_counter() - started:.0f} s, {model.name}\n")
    print(table(outcomes))
    crashed = [o for o in outcomes if not o.completed]
    if crashed:
        raise SystemExit(
            f"{len(crashed)} questions crashed: " + "; ".join(f"{o.question} ({o.error})" for o in crashed)
        )


if __name__ == "__main__":
    main()

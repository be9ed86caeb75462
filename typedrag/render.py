"""Terminal rendering of results: a readable answer, and `--trace` as a tree.

Questions, passages, titles and model output are data: they are never interpreted as rich markup
(`[/x]` or `[link=...]` in them prints verbatim instead of crashing or turning into links), and their
control characters are shown, not obeyed (`for_terminal`): a passage holding ESC sequences cannot
clear the screen, write the clipboard or plant a hyperlink.
"""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text as _RichText
from rich.tree import Tree

from typedrag.result import UNSOURCED_LABEL, AnswerResult
from typedrag.text import for_terminal


def Text(text: str = "", style: str = "") -> _RichText:  # noqa: N802  (rich's name, so every use is covered)
    """A rich Text of data: no markup, control characters made visible."""
    return _RichText(for_terminal(text), style=style)


def _header(result: AnswerResult) -> str:
    parts = [f"method {result.method}", f"strategy {result.strategy}"]
    if result.abstained:
        parts.append("abstained: the documents do not answer")
    if result.type is not None:
        parts.append(f"type {result.type.type} ({result.type.confidence:.2f}, {result.type.source})")
    parts.append(f"answered by {result.engines.generator}")
    return " · ".join(parts)


def _notes(result: AnswerResult, show_sources: int = 5) -> list[Text]:
    """What follows the answer text: the sources it cites (or the top few). What the pipeline noted on the way
    (fallbacks, dropped aspects) is for `--trace` and `/trace`, not for every answer."""
    notes = []
    if (
        result.unsourced is not None and result.unsourced.sentences
    ):  # apart from the answer: the documents do not say it
        notes.append(Text(f"\n{UNSOURCED_LABEL}", style="bold yellow"))
        notes.append(Text(" ".join(result.unsourced.sentences)))
    cited = {n for c in result.citations for n in c.source_numbers}
    listed = [s for s in result.sources if s.number in cited] or result.sources[:show_sources]
    if listed:
        notes.append(Text("\nNearest passages, not an answer" if result.abstained else "\nSources", style="bold"))
        for s in listed:
            notes.append(Text(f"[{s.number}] {s.where} ({s.passage_id})", style="dim"))
    return notes


def render_answer(console: Console, result: AnswerResult) -> None:
    body = [Text(_header(result), style="dim"), Text(""), Text(result.answer), *_notes(result)]
    console.print(Panel(Group(*body), title=Text(result.question)))


def render_after_stream(console: Console, result: AnswerResult) -> None:
    """The rest of an answer whose text was printed as it streamed: the sources it cites and who answered."""
    console.print()
    for note in _notes(result):
        console.print(note)
    console.print(Text(_header(result), style="dim"))


def progress_line(event: str, data: dict) -> Text | None:
    """A one-line note for a progress event shown while an answer streams (None: nothing to show)."""
    if event == "rewrite":
        read = f"read as: {data['standalone_question']}" if data["rewritten"] else "stands alone: not rewritten"
        return Text(f"{read} ({data['by']})", style="dim")
    if event == "abstained":
        return Text(f"the documents do not answer: {data['reason']}", style="yellow")
    if event == "type":
        return Text(f"type {data['type']} ({data['confidence']:.2f}, {data['source']})", style="dim")
    if event == "plan":
        return Text(f"plan {json.dumps(data['plan'], ensure_ascii=False)}", style="dim")
    if event == "aspect":
        aspect = data["aspect"]
        done = f"dropped: {aspect['error']}" if aspect.get("error") else "answered"
        return Text(f"aspect {aspect['label']}: {done}", style="dim")
    return None


def trace_tree(result: AnswerResult) -> Tree:
    tree = Tree(Text(result.question, style="bold"))
    tree.add(Text(_header(result)))
    if result.rewrite is not None:
        how = f"rewritten by {result.rewrite.by}" if result.rewrite.rewritten else f"stands alone ({result.rewrite.by})"
        carried = f", carried in: {', '.join(result.rewrite.carried)}" if result.rewrite.carried else ""
        rewrite = tree.add(Text(f"conversation: {result.rewrite.history_turns} earlier turns; {how}{carried}"))
        rewrite.add(Text(f"read as: {result.standalone_question}"))
        rewrite.add(Text(f"searched: {' | '.join(result.searched)}"))
    if result.instructions:
        tree.add(Text(f"instructions: {result.instructions}"))
    if result.abstention is not None:
        a = result.abstention
        score = f" (score {a.score:.2f} below {a.bar:.2f})" if a.score is not None and a.bar is not None else ""
        tree.add(Text(f"abstained ({a.by}): {a.reason}{score}", style="yellow"))
    if result.type is not None:
        probs = ", ".join(
            f"{k} {v:.2f}" for k, v in sorted(result.type.probabilities.items(), key=lambda kv: -kv[1])[:3]
        )
        tree.add(
            Text(
                f"type: {result.type.type} confidence {result.type.confidence:.2f} from {result.type.source} [{probs}]"
            )
        )
    if result.plan is not None:
        tree.add(Text(f"plan: {json.dumps(result.plan, ensure_ascii=False)}"))
    if result.aspects:
        aspects = tree.add(Text("aspects"))
        for a in result.aspects:
            node = aspects.add(
                _RichText.assemble(Text(a.label, "cyan"), Text(f" (query: {a.query}) sources {a.source_numbers}"))
            )
            if a.error:
                node.add(Text(f"dropped: {a.error}", style="red"))
            elif a.answer:
                node.add(Text(a.answer))
    sources = tree.add(Text(f"sources ({len(result.sources)})"))
    for s in result.sources:
        sources.add(Text(f"[{s.number}] {s.passage_id} · {s.where} · score {s.score:.3f}"))
    if result.citations:
        cites = tree.add(Text("citations"))
        for c in result.citations:
            cites.add(Text(f"{c.source_numbers} {c.text[:100]}"))
    for f in result.fallbacks:
        tree.add(Text(f"fallback at {f.step}: {f.reason}", style="yellow"))
    if result.llm_calls:
        calls = tree.add(
            Text(
                f"LLM calls: {result.usage.calls} ({result.usage.cached_calls} cached, {result.usage.requests} requests), "
                f"tokens {result.usage.prompt_tokens}+{result.usage.completion_tokens}"
            )
        )
        for c in result.llm_calls:
            extra = f" structured={c.structured}" if c.structured else ""
            extra += f" error={c.error}" if c.error else ""
            calls.add(
                Text(
                    f"{c.role} · {c.engine} · {c.latency_ms:.0f} ms · {c.prompt_tokens}+{c.completion_tokens} tok{extra}"
                )
            )
    if result.steps:  # the offline engine's steps are its own: it calls no LLM
        by = "engine steps: {}" if result.llm_calls else "steps: {}, by the offline engine (no LLM)"
        steps = tree.add(Text(by.format(len(result.steps))))
        for step in result.steps:
            steps.add(
                Text(
                    f"{step.role} · {step.engine} · {step.latency_ms:.0f} ms"
                    + (f" error={step.error}" if step.error else "")
                )
            )
    tree.add(Text(f"answer: {result.answer}"))
    if result.unsourced is not None:
        unsourced = tree.add(
            Text(
                f"not from the documents (knowledge = {result.knowledge}, by {result.unsourced.by}; not covered: {result.unsourced.covers or '-'})",
                style="yellow",
            )
        )
        for sentence in result.unsourced.sentences:
            unsourced.add(Text(sentence))
    tree.add(Text(f"timings (ms): {result.timings_ms} · prompts {result.prompt_version}"))
    return tree

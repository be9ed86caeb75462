"""typedrag: Typed-RAG for non-factoid questions (Lee et al., arXiv 2503.15879).

The public API. Heavy parts (the tantivy index, the evaluation harness) are imported on first use,
so `import typedrag` is quick and works without them.

    >>> from typedrag import OfflineEngine, Pipeline, ListRetriever
    >>> pipeline = Pipeline(OfflineEngine(), ListRetriever(["Cats purr when they are content."]))
    >>> pipeline.settings.top_k
    5
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # the pipeline and what it returns
    "Pipeline": "typedrag.pipeline",
    "PipelineSettings": "typedrag.pipeline",
    "Method": "typedrag.pipeline",
    "Conversation": "typedrag.conversation",
    "Turn": "typedrag.history",
    "NFQType": "typedrag.nfq",
    "AnswerResult": "typedrag.result",
    "Abstention": "typedrag.result",
    "Aspect": "typedrag.result",
    "Citation": "typedrag.result",
    "Source": "typedrag.result",
    "Trace": "typedrag.result",
    "TypeDecision": "typedrag.result",
    "Unsourced": "typedrag.result",
    "Passage": "typedrag.records",
    "ScoredPassage": "typedrag.records",
    # the parts you can swap (protocols) and the ones that ship
    "Retriever": "typedrag.index.base",
    "ChatModel": "typedrag.llm.base",
    "TypeClassifier": "typedrag.classify.base",
    "TypePrediction": "typedrag.classify.base",
    "Reranker": "typedrag.rerank",
    "Strategy": "typedrag.steps",
    "StrategyOutput": "typedrag.steps",
    "Depths": "typedrag.steps",
    "Engine": "typedrag.engines.base",
    "PlanTask": "typedrag.engines.base",
    "WriteTask": "typedrag.engines.base",
    "Grounded": "typedrag.engines.base",
    "Written": "typedrag.engines.base",
    "Reader": "typedrag.reader",
    "Prompt": "typedrag.prompts",
    "OpenAIChatModel": "typedrag.llm.openai_chat",
    "LLMEngine": "typedrag.engines.llm_engine",
    "OfflineEngine": "typedrag.engines.offline",
    "EmbeddingReranker": "typedrag.rerank",
    "ShippedClassifier": "typedrag.classify.shipped",
    "load_default_classifier": "typedrag.classify.shipped",
    "TantivyRetriever": "typedrag.index.tantivy",
    "build_index": "typedrag.index.tantivy",
    "open_retriever": "typedrag.index.tantivy",
    "ListRetriever": "typedrag.index.memory",
    "FunctionRetriever": "typedrag.index.memory",
    "default_routes": "typedrag.strategies",
    # evaluation
    "evaluate": "typedrag.evaluation.runner",
    "aevaluate": "typedrag.evaluation.runner",
    "System": "typedrag.evaluation.runner",
    "EvalOptions": "typedrag.evaluation.runner",
    "EvalQuestion": "typedrag.evaluation.datasets",
    "Reference": "typedrag.evaluation.datasets",
    "ProxyJudge": "typedrag.evaluation.judges",
    "LLMJudge": "typedrag.evaluation.judges",
    # errors
    "TypedragError": "typedrag.errors",
    "UserError": "typedrag.errors",
    "LLMError": "typedrag.errors",
}
__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'typedrag' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__

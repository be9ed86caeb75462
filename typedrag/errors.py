"""One error tree for everything typedrag raises on purpose.

    TypedragError
    ├── UserError            the user can fix it: the CLI prints one line and exits 2, the server answers 4xx
    │   ├── ConfigError      settings, flags, environment, config file
    │   ├── QuestionError    an empty, oversized or unknown-type question; a bad question file
    │   ├── IndexUnusableError   missing, damaged or incompatible index
    │   ├── CorpusError      a missing source, or a malformed record with --strict
    │   ├── DatasetError     an evaluation dataset that cannot be read
    │   ├── RunError         an evaluation run directory that cannot be used as asked
    │   └── ModelUnavailable a model file or a local model server that cannot be loaded
    ├── LLMError             the endpoint gave no usable reply after its retries
    └── StrategyError        internal: a typed plan could not run; the pipeline answers with plain RAG
        ├── PlanFailed       no valid plan after the repair attempt
        └── AspectsFailed    every aspect of a decomposed question failed

Callers map errors by class (`except UserError`), never by a hand-kept list.
"""

from __future__ import annotations


class TypedragError(Exception):
    """Root of every error typedrag raises on purpose."""


class UserError(TypedragError):
    """Something the user can fix; the message says what and how, in one line."""


class ConfigError(UserError):
    """Invalid settings: a flag, an environment variable or the config file."""


class QuestionError(UserError):
    """The question cannot be answered as given (empty, too long, unknown forced type, bad question file)."""


class IndexUnusableError(UserError):
    """An index is missing, corrupt, or was built by an incompatible version (the message names the fix)."""


class CorpusError(UserError):
    """A source is missing, or (with strict=True) a record is malformed: `file:line: reason`."""


class DatasetError(UserError):
    """A dataset file is missing or a row is malformed (the message names file and line)."""


class RunError(UserError):
    """An evaluation run directory cannot be used as asked (the message says why and what to do)."""


class ModelUnavailable(UserError):
    """A model file is missing or damaged, or a local model server cannot start."""


class LLMError(TypedragError):
    """The endpoint could not produce a reply (after retries): connection, timeout, HTTP error."""


class StrategyError(TypedragError):
    """A typed strategy could not run; the pipeline records why and answers with plain RAG."""


class PlanFailed(StrategyError):
    """The engine could not produce a valid plan (after its one repair attempt)."""


class AspectsFailed(StrategyError):
    """Every aspect of a decomposed question failed or added nothing."""

"""The response cache: a damaged cache file is refused with the fix, never a crash or a traceback."""

from __future__ import annotations

import pytest

from typedrag.errors import UserError
from typedrag.llm.cache import ResponseCache
from typedrag.testing.openai_stub import OpenAIStubServer

from .conftest import assert_clean_failure, run_cli


@pytest.fixture
def damaged_cache(tmp_path):
    (tmp_path / "llm-cache.sqlite").write_bytes(b"this is not a database, it is a leftover of a full disk\n" * 100)
    return tmp_path


def test_damaged_cache_file_is_refused_with_the_fix(damaged_cache):
    with pytest.raises(UserError, match=r"llm-cache.sqlite is unusable \(file is not a database\): delete it"):
        ResponseCache(damaged_cache)


def test_cli_with_a_damaged_cache_exits_2(damaged_cache, small_index):
    with OpenAIStubServer() as server:
        proc = run_cli(
            "ask",
            "Why did Rome fall?",
            "--index",
            str(small_index),
            "--llm",
            "stub",
            "--base-url",
            server.base_url,
            env={"TYPEDRAG_CACHE_DIR": str(damaged_cache)},
        )
    assert_clean_failure(proc, "llm-cache.sqlite is unusable", "delete it")

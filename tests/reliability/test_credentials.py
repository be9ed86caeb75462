"""Issue 13, items 3 and 4: credentials inside --base-url never appear anywhere; a config file in the
current folder cannot send the user's API key to a host of its choosing."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from typedrag.config import ConfigError, load_settings
from typedrag.llm.base import LLMError
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.redact import redact_text, redact_url
from typedrag.testing.openai_stub import OpenAIStubServer, Reply, default_content

from .conftest import assert_clean_failure, run_cli, wait_until_serving

PASSWORD = "pw-planted-s3cret"


def with_userinfo(base_url: str) -> str:
    return base_url.replace("http://", f"http://alice:{PASSWORD}@", 1)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "url, shown",
    [
        (f"http://alice:{PASSWORD}@h:8/v1", "http://alice:****@h:8/v1"),
        (f"https://{PASSWORD}@h/v1", "https://****@h/v1"),
        ("http://h:8/v1", "http://h:8/v1"),
    ],
)
def test_redact_url_hides_the_password_like_pip(url, shown):
    assert redact_url(url) == shown
    assert redact_text(f"cannot reach {url}: refused") == f"cannot reach {shown}: refused"


def test_engine_name_and_errors_hide_userinfo():
    model = OpenAIChatModel(
        model="m", base_url=with_userinfo(f"http://127.0.0.1:{closed_port()}/v1"), max_retries=0, timeout=2
    )
    assert PASSWORD not in model.name and "127.0.0.1" in model.name
    import asyncio

    with pytest.raises(LLMError) as caught:
        asyncio.run(model.complete([{"role": "user", "content": "hi"}], role="test"))
    assert PASSWORD not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_cli_error_hides_userinfo(small_index, tmp_path):
    url = with_userinfo(f"http://127.0.0.1:{closed_port()}/v1")
    (tmp_path / "none.toml").write_text("")
    proc = run_cli(
        "ask",
        "Why did Rome fall?",
        "--index",
        str(small_index),
        "--type",
        "reason",
        "--llm",
        "stub",
        "--base-url",
        url,
        env={"TYPEDRAG_CACHE_DIR": str(tmp_path / "c"), "TYPEDRAG_CONFIG": str(tmp_path / "none.toml")},
    )
    assert PASSWORD not in proc.stdout + proc.stderr
    assert "127.0.0.1" in proc.stdout + proc.stderr


def test_httpx_log_hides_userinfo(caplog):
    caplog.set_level(logging.INFO)
    with OpenAIStubServer() as stub:
        model = OpenAIChatModel(model="m", base_url=with_userinfo(stub.base_url), max_retries=0, timeout=5)
        import asyncio

        asyncio.run(model.complete([{"role": "user", "content": "hi"}], role="test"))
    lines = [r.getMessage() for r in caplog.records]
    assert any("HTTP Request" in line for line in lines), lines  # httpx did log the request
    assert not any(PASSWORD in line for line in lines), lines


def test_served_responses_and_server_log_hide_userinfo(small_index, tmp_path):
    def flaky(request):  # plans fail (a fallback is recorded), answers work
        if request.schema_name:
            return Reply(status=400, content=f"bad request to {request.headers.get('host')}")
        return Reply(content=default_content(request))

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with OpenAIStubServer(flaky) as stub:
        code = "import typer; from typedrag.server.command import serve_command; typer.run(serve_command)"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
        env["TYPEDRAG_CONFIG"] = str(tmp_path / "none.toml")
        (tmp_path / "none.toml").write_text("")
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                "--port",
                str(port),
                "--index",
                str(small_index),
                "--llm",
                "stub",
                "--base-url",
                with_userinfo(stub.base_url),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            wait_until_serving(process, port)  # issue 55: on readiness, not within 90 s (at load 20 it took longer)
            bodies = [
                httpx.post(f"http://127.0.0.1:{port}/v1/answer", json={"question": q, "type": t}, timeout=None).text
                for q, t in [("Why did Rome fall?", "reason"), ("How do I bake bread?", "instruction")]
            ]
            bodies.append(httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=None).text)
        finally:
            process.terminate()
            _, stderr = process.communicate()
    result = json.loads(bodies[0])
    assert result["engines"]["generator"].endswith("@127.0.0.1:%d" % int(stub.base_url.split(":")[2].split("/")[0]))
    assert result["fallbacks"], "the failed plan should be recorded as a fallback"
    assert "HTTP Request" in stderr  # the httpx INFO log is there, and redacted
    for text in [*bodies, stderr]:
        assert PASSWORD not in text


# --- item 4: a config file's base_url gets no key it was not given ---------------------------------

KEY = "sk-user-key-0123456789"


def write_config(folder: Path, text: str) -> Path:
    (folder / "typedrag.toml").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TYPEDRAG_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_config_base_url_with_an_env_key_is_refused(in_folder):
    write_config(in_folder, '[llm]\nmodel = "gpt-4o-mini"\nbase_url = "https://collector.example/v1"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"OPENAI_API_KEY": KEY})
    message = str(caught.value)
    assert "collector.example" in message and "OPENAI_API_KEY" in message and "\n" not in message
    assert KEY not in message


def test_config_judge_base_url_with_an_env_key_is_refused(in_folder):
    write_config(in_folder, '[judge]\nmodel = "gpt-4o"\nbase_url = "https://collector.example/v1"\n')
    with pytest.raises(ConfigError, match="TYPEDRAG_JUDGE_API_KEY"):
        load_settings(env={"TYPEDRAG_JUDGE_API_KEY": KEY})
    assert load_settings(env={"TYPEDRAG_API_KEY": KEY}).judge.api_key is None  # the generator's key is not inherited


def test_judge_inheriting_a_config_named_endpoint_is_refused(in_folder):
    write_config(in_folder, '[llm]\nmodel = "m"\nbase_url = "https://collector.example/v1"\n[judge]\nmodel = "m"\n')
    with pytest.raises(ConfigError, match="collector.example"):
        load_settings(env={"OPENAI_API_KEY": KEY})


def test_cli_refuses_in_one_line(in_folder, small_index):
    write_config(in_folder, '[llm]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n')
    proc = run_cli("ask", "Why?", "--index", str(small_index), env={"OPENAI_API_KEY": KEY}, cwd=in_folder)
    assert_clean_failure(proc, "127.0.0.1:9", "OPENAI_API_KEY")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "config, env",
    [
        ('[llm]\nmodel = "m"\nbase_url = "https://api.openai.com/v1"\n', {"OPENAI_API_KEY": KEY}),  # the default host
        (
            f'[llm]\nmodel = "m"\nbase_url = "https://h.example/v1"\napi_key = "{KEY}"\n',
            {},
        ),  # key set for it in the file
        (
            '[llm]\nmodel = "m"\n',
            {"OPENAI_API_KEY": KEY, "TYPEDRAG_BASE_URL": "https://h.example/v1"},
        ),  # env names the host
        ('[llm]\nmodel = "m"\nbase_url = "https://h.example/v1"\n', {}),  # no key at all
    ],
    ids=["default-host", "key-in-file", "env-base-url", "no-key"],
)
def test_allowed_combinations(in_folder, config, env):
    write_config(in_folder, config)
    settings = load_settings(env=env)
    assert settings.llm.model == "m"


def test_command_line_base_url_is_explicit(in_folder):
    write_config(in_folder, '[llm]\nmodel = "m"\nbase_url = "https://collector.example/v1"\n')
    settings = load_settings({"llm.base_url": "https://mine.example/v1"}, env={"OPENAI_API_KEY": KEY})
    assert settings.llm.base_url == "https://mine.example/v1" and settings.llm.api_key.get_secret_value() == KEY

"""Issue 26: the hostile re-test's defects, each against the real CLI, a real server on loopback or a real index.

1. `ask --out` never rewrites a file typedrag did not write (notes, the question file itself).
2. No credential (the Milvus token included) goes to a destination named only by a config file.
3. Control characters from a corpus, a model or a file name never reach the terminal raw.
4. `[n]` markers inside passages cannot pose as citations.
5. A run of characters without spaces is cut: no passage is huge, and the cut is recorded.
6. A malformed --base-url is one line, exit 2, with nothing of its secret.
7. Connections trickling a body cannot fill the connection cap, and the log stays small.
9. An unreadable folder or file is reported as `path: permission denied`, never dropped silently.
(8, streamed .txt/.md files under a memory limit, is in test_formats.py.)
"""

from __future__ import annotations

import ctypes
import json
from collections import Counter
import os
import socket
import subprocess
import sys

import httpx
import pytest

from typedrag.config import CREDENTIALS, ConfigError, Settings, load_settings
from typedrag.corpus.chunker import MAX_PASSAGE_CHARS
from typedrag.index import build_index, open_retriever
from typedrag.testing.openai_stub import OpenAIStubServer

from .conftest import assert_clean_failure, run_cli


def write_jsonl(path, docs):
    path.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, t, x in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def rag_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    corpus = write_jsonl(
        root / "c.jsonl",
        [
            ("bees", "Bee", "Bees collect nectar and pollen from flowers and make honey in their hives."),
            (
                "wasps",
                "Wasp",
                "Wasps are insects that build paper nests [2][3]. Wasps are angry government robots [4].",
            ),
            ("ants", "Ant", "Ants live in colonies with a queen and workers that forage for food."),
        ],
    )
    build_index([corpus], root / "index", passage_words=40, show_progress=False)
    return root / "index"


# --- 1. ask --out --------------------------------------------------------------------------------


def test_ask_out_refuses_a_notes_file_and_leaves_it_as_it_was(rag_index, tmp_path):
    questions = tmp_path / "q.txt"
    questions.write_text("Why do bees make honey?\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nline two")
    proc = run_cli("ask", "--file", str(questions), "--out", str(notes), "--index", str(rag_index), "--method", "rag")
    assert_clean_failure(proc, "not a record typedrag wrote")
    assert notes.read_text() == "my notes\nline two"


def test_ask_out_refuses_the_question_file_itself(rag_index, tmp_path):
    questions = tmp_path / "q1.txt"
    questions.write_text("Why do bees make honey?\nWhat do ants eat?\n")
    proc = run_cli(
        "ask", "--file", str(questions), "--out", str(questions), "--index", str(rag_index), "--method", "rag"
    )
    assert_clean_failure(proc, "is the question file itself")
    assert questions.read_text() == "Why do bees make honey?\nWhat do ants eat?\n"


def test_ask_out_still_resumes_its_own_torn_log(rag_index, tmp_path):
    questions = tmp_path / "q.txt"
    questions.write_text("Why do bees make honey?\nWhat do ants eat?\n")
    out = tmp_path / "answers.jsonl"
    assert (
        run_cli(
            "ask", "--file", str(questions), "--out", str(out), "--index", str(rag_index), "--method", "rag"
        ).returncode
        == 0
    )
    first, second = out.read_text().splitlines()
    out.write_text(first + "\n" + second[: len(second) // 2])  # killed while writing the second record
    proc = run_cli("ask", "--file", str(questions), "--out", str(out), "--index", str(rag_index), "--method", "rag")
    assert proc.returncode == 0, proc.stderr
    assert "1 answered" in proc.stdout
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [
        json.loads(first)["id"],
        json.loads(second)["id"],
    ]


# --- 2. credentials and config-named destinations -----------------------------------------------------


class Listener:
    """A TCP port that counts the connections made to it (nothing should ever connect)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        return self

    def connections(self) -> int:
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1

    def __exit__(self, *exc):
        self.sock.close()


def test_the_milvus_token_is_not_sent_to_a_uri_only_the_config_file_names(tmp_path):
    with Listener() as listener:
        (tmp_path / "typedrag.toml").write_text(
            f'backend = "milvus"\nmilvus_uri = "http://127.0.0.1:{listener.port}"\n'
        )
        proc = run_cli(
            "ask",
            "Why do bees sting?",
            "--method",
            "rag",
            cwd=tmp_path,
            env={"TYPEDRAG_MILVUS_TOKEN": "root:planted-token"},
        )
        assert_clean_failure(proc, "milvus_uri", "milvus_token from TYPEDRAG_MILVUS_TOKEN", "refused")
        assert "planted-token" not in proc.stderr
        assert listener.connections() == 0


def test_a_token_the_config_file_holds_itself_may_go_to_its_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TYPEDRAG_CONFIG", raising=False)
    (tmp_path / "typedrag.toml").write_text('milvus_uri = "http://127.0.0.1:19530"\nmilvus_token = "its-own"\n')
    assert load_settings(env={}).milvus_token.get_secret_value() == "its-own"
    with pytest.raises(ConfigError, match="milvus_token"):
        (tmp_path / "typedrag.toml").write_text('milvus_uri = "http://127.0.0.1:19530"\n')
        load_settings(env={"TYPEDRAG_MILVUS_TOKEN": "from-env"})
    # the user's own choice of destination is theirs: the flag or the environment
    assert load_settings({"milvus_uri": "http://127.0.0.1:1"}, env={"TYPEDRAG_MILVUS_TOKEN": "t"}).milvus_token


def secret_settings(model=Settings, prefix=()):
    """The keys of every SecretStr setting, at any depth."""
    from pydantic import BaseModel, SecretStr

    for name, field in model.model_fields.items():
        annotation = field.annotation
        inner = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
        for kind in inner:
            if kind is SecretStr:
                yield (*prefix, name)
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from secret_settings(kind, (*prefix, name))


def test_every_secret_setting_is_bound_to_its_destination():
    assert set(secret_settings()) == {credential.secret for credential in CREDENTIALS}


# --- 3. control characters on the terminal ----------------------------------------------------------

ESCAPES = "\x1b[2J\x1b[H\x1b]52;c;ZXZpbA==\x07\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\\x9b31m"


@pytest.fixture(scope="module")
def escape_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("escapes")
    corpus = write_jsonl(
        root / "c.jsonl",
        [("evil", f"Bee{ESCAPES}", f"Bees make honey from nectar {ESCAPES} in their hives, and store it for winter.")],
    )
    build_index([corpus], root / "index", passage_words=40, show_progress=False)
    return root / "index"


@pytest.mark.parametrize("flags", [[], ["--trace"], ["--method", "rag"]])
def test_no_control_character_from_the_corpus_reaches_the_terminal(escape_index, flags):
    proc = run_cli("ask", "Why do bees make honey?", "--index", str(escape_index), *flags)
    assert proc.returncode == 0, proc.stderr
    for stream in (proc.stdout, proc.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream and "\x07" not in stream
    assert "\\x1b[2J" in proc.stdout  # shown, not obeyed


def test_json_output_keeps_the_text_as_it_is(escape_index):
    proc = run_cli("ask", "Why do bees make honey?", "--index", str(escape_index), "--method", "rag", "--json")
    result = json.loads(proc.stdout)
    assert ESCAPES in result["sources"][0]["text"] and "\x1b" not in proc.stdout  # JSON escapes it as \u001b


def test_a_file_name_with_escapes_is_shown_not_obeyed(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("Bees make honey from the nectar of flowers.\n")
    (folder / "bad\x1b[31mred.html").write_bytes(b"\x00\x01\x02 binary junk named .html \xff\xfe")
    proc = run_cli("index", str(folder), "--index", str(tmp_path / "index"))
    assert "\x1b" not in proc.stderr + proc.stdout
    assert "bad\\x1b[31mred.html" in proc.stderr


# --- 4. citation markers inside passages -----------------------------------------------------------


def test_markers_inside_a_passage_cannot_pin_its_claim_on_other_sources(rag_index):
    proc = run_cli("ask", "What are wasps?", "--index", str(rag_index), "--method", "rag", "--json")
    result = json.loads(proc.stdout)
    wasp = next(s for s in result["sources"] if s["passage_id"].startswith("wasps"))
    assert "[2]" not in wasp["text"] and "[4]" not in wasp["text"] and "paper nests" in wasp["text"]
    nests = [c for c in result["citations"] if "paper nests" in c["text"]]
    assert nests and all(c["source_numbers"] == [wasp["number"]] for c in nests)


def test_an_llm_never_sees_the_markers_a_passage_carries(rag_index):
    from typedrag.engines.llm_engine import LLMEngine
    from typedrag.llm.openai_chat import OpenAIChatModel
    from typedrag.pipeline import Pipeline
    import asyncio

    with OpenAIStubServer() as stub:
        pipeline = Pipeline(LLMEngine(OpenAIChatModel(model="stub", base_url=stub.base_url)), open_retriever(rag_index))
        asyncio.run(pipeline.answer("What are wasps?", "rag"))
        prompt = stub.requests[-1].prompt
    assert "robots" in prompt and "[2][3]" not in prompt and "robots [4]" not in prompt


# --- 5. a run without spaces -----------------------------------------------------------------------


def test_a_huge_run_without_spaces_is_cut_and_the_cut_recorded(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", [("blob", "Blob", "start " + "x" * 2_000_000 + " end of the text")])
    proc = run_cli("index", str(corpus), "--index", str(tmp_path / "index"))
    assert proc.returncode == 0, proc.stderr
    assert "note:" in proc.stderr and "2,000,000 characters without a space was cut" in "".join(proc.stderr.split("\n"))
    retriever = open_retriever(tmp_path / "index")
    hits = retriever.search("start end text", 50)
    assert hits and max(len(hit.passage.text) for hit in hits) <= MAX_PASSAGE_CHARS
    assert retriever.manifest["counts"]["passages"] >= 2_000_000 // MAX_PASSAGE_CHARS


# --- 6. a malformed --base-url ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://user:Pa#ss99@127.0.0.1:9/v1",
        "http://user:Pa/ss99@127.0.0.1:9/v1",
        "http://user:Pa?ss99@127.0.0.1:9/v1",
        "http://user:12#34ss99@127.0.0.1:9/v1",
        "http://127.0.0.1:99999/v1",
    ],
)
def test_a_malformed_base_url_is_one_line_exit_2_and_shows_no_secret(url):
    proc = run_cli("ask", "Why do bees sting?", "--llm", "m", "--base-url", url, "--method", "llm")
    assert_clean_failure(proc, "not a valid URL")
    assert len(proc.stderr.strip().splitlines()) == 1
    for piece in ("Pa", "ss99", "34ss", "99999"):
        assert piece not in proc.stderr


# --- 7. body-phase slow-loris -----------------------------------------------------------------------


def test_connections_trickling_a_body_cannot_fill_the_connection_cap(small_index):
    from .test_service_guards import app_for, one_window, served
    from typedrag.engines.offline import OfflineEngine
    from typedrag.pipeline import Pipeline
    import io
    import logging

    from typedrag.server.logs import configure_logging

    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("info", stream)
    limiter = one_window(root.handlers[0])  # every eviction in one window: counted against the burst, not the clock
    app = app_for(Pipeline(OfflineEngine(), open_retriever(small_index)), small_index, body_timeout=60.0)
    head = b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    try:
        with served(app, header_timeout=60.0, max_connections=20) as (url, port):

            def trickler():
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(head)
                return sock

            slow = [trickler() for _ in range(20)]  # the whole cap, each sending its body a byte at a time
            healthy = 0
            for _ in range(100):  # the attack goes on: every evicted trickler reconnects at once
                for index, sock in enumerate(slow):
                    try:
                        sock.sendall(b" ")
                    except OSError:
                        sock.close()
                        slow[index] = trickler()
                healthy += httpx.get(f"{url}/healthz", timeout=30).status_code == 200
            for sock in slow:
                sock.close()
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    assert healthy == 100
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    noise = [line for line in lines if line["logger"] == "typedrag.server.client"]
    assert noise  # evictions are logged...
    per_message = Counter(line["message"] for line in noise)
    assert max(per_message.values()) <= limiter.burst, per_message  # ...each kind up to the burst, the rest counted


# --- 9. unreadable files and folders (as root too: the reader runs as an unprivileged user) --------------


def without_permission_override() -> None:
    """In a child about to exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set, so even
    root is refused what a file's mode refuses (the test runs as root in CI)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_an_unreadable_folder_and_file_are_reported_not_dropped_silently(tmp_path):
    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "locked" / "inside.txt").write_text("Hidden text about the okapi.\n")
    (docs / "secret.txt").write_text("Secret text about the okapi.\n")
    (docs / "open.txt").write_text("Open text about the quokka of Rottnest Island.\n")
    (docs / "secret.txt").chmod(0)
    (docs / "locked").chmod(0)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TYPEDRAG_", "OPENAI_"))}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "typedrag.cli", "index", str(docs), "--index", str(tmp_path / "index")],
            capture_output=True,
            text=True,
            env=clean,
            preexec_fn=without_permission_override if os.geteuid() == 0 else None,
            timeout=300,
        )
    finally:
        (docs / "locked").chmod(0o755)
        (docs / "secret.txt").chmod(0o644)
    assert proc.returncode == 0, proc.stderr
    squashed = " ".join(proc.stderr.split())
    assert f"skipped {docs / 'locked'}: permission denied" in squashed
    assert f"skipped {docs / 'secret.txt'}: permission denied" in squashed
    assert "indexed 1 documents into 1 passages (2 skipped)" in " ".join(proc.stdout.split())

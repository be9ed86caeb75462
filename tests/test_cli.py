"""The command line as a user runs it: ask (single and batch), classify, errors without tracebacks."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from typedrag.batch import content_id
from typedrag.classify import load_default_classifier
from typedrag.classify.llm_classifier import AutoClassifier, LLMTypeClassifier
from typedrag.cli import app
from typedrag.engines.base import Trace
from typedrag.llm.openai_chat import OpenAIChatModel
from typedrag.nfq import NFQType
from typedrag.testing.openai_stub import OpenAIStubServer, Reply

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in (
        "TYPEDRAG_CONFIG",
        "TYPEDRAG_LLM",
        "TYPEDRAG_BASE_URL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "TYPEDRAG_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TYPEDRAG_CACHE_DIR", str(tmp_path / "cache"))


def test_ask_json_offline_names_the_engine_and_cites(small_index):
    out = runner.invoke(
        app,
        ["ask", "What is the difference between a crocodile and an alligator?", "--index", str(small_index), "--json"],
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["engines"]["generator"] == "offline-extractive"
    assert result["type"]["type"] == "COMPARISON" and result["type"]["source"].startswith("classifier:")
    assert result["strategy"] == "comparison"
    assert result["citations"]


def test_ask_trace_renders_a_tree(small_index):
    out = runner.invoke(app, ["ask", "Why did the Western Roman Empire fall?", "--index", str(small_index), "--trace"])
    assert out.exit_code == 0, out.output
    assert "aspects" in out.stdout and "sources" in out.stdout and "offline-extractive" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "   "], "question is empty"),
        (["ask", "x" * 3000], "over the limit"),
        (["ask", "Why?", "--type", "poem"], "unknown question type"),
        (["ask", "Why?", "--method", "magic"], "unknown method"),
        (["ask", "Why?", "--index", "no-such-index"], "no index at"),
        (["classify", ""], "empty"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(small_index, args, message):
    if "--index" not in args:
        args = [*args, "--index", str(small_index)] if args[0] == "ask" else args
    out = runner.invoke(app, args)
    assert out.exit_code == 2, out.output
    assert message in out.output
    assert "Traceback" not in out.output


def test_batch_ask_resumes_without_losing_or_duplicating(small_index, tmp_path):
    questions = tmp_path / "q.txt"
    questions.write_text("How does photosynthesis work?\nWhy did Rome fall?\n\nHow do I bake bread?\n")
    answers = tmp_path / "answers.jsonl"
    args = ["ask", "--file", str(questions), "--out", str(answers), "--index", str(small_index)]
    assert runner.invoke(app, args).exit_code == 0
    lines = answers.read_text().splitlines()
    assert [json.loads(l)["id"] for l in lines] != [] and len(lines) == 3
    # Simulate a kill mid-write: drop the last record, leave half of it behind.
    answers.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])
    out = runner.invoke(app, args)
    assert "1 answered" in out.stdout
    ids = [json.loads(l)["id"] for l in answers.read_text().splitlines()]
    assert sorted(ids) == sorted(
        content_id(q) for q in ["How does photosynthesis work?", "Why did Rome fall?", "How do I bake bread?"]
    )


def test_classify_file_csv(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "How do I change a flat tyre?"}) + "\n")
    out = runner.invoke(app, ["classify", "--file", str(questions), "--format", "csv"])
    assert out.exit_code == 0, out.output
    header, row = out.stdout.strip().splitlines()
    assert header.startswith("id,question,type,confidence,source,NOT-A-QUESTION")
    assert row.startswith("a,How do I change a flat tyre?,INSTRUCTION,")


async def test_llm_classifier_uses_its_schema_and_records_the_call():
    with OpenAIStubServer(lambda r: Reply(content='{"type": "debate"}')) as server:
        model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0)
        trace = Trace()
        prediction = await LLMTypeClassifier(model).aclassify("Is homework useful?", trace)
    assert prediction.label is NFQType.DEBATE and prediction.source.startswith("llm:")
    assert server.requests[0].schema_name == "TypeVerdict"
    assert [c.role for c in trace.calls] == ["classify"]


async def test_auto_classifier_asks_the_llm_only_when_unsure():
    shipped = load_default_classifier()
    with OpenAIStubServer(lambda r: Reply(content='{"type": "EXPERIENCE"}')) as server:
        auto = AutoClassifier(
            shipped, LLMTypeClassifier(OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0))
        )
        sure = await auto.aclassify("What is the difference between a crocodile and an alligator?")
        assert sure.source.startswith("classifier:") and server.requests == []
        unsure_question = "lol ok so um cars"
        if shipped.classify(unsure_question).confidence < 0.6:
            unsure = await auto.aclassify(unsure_question)
            assert unsure.source.startswith("llm:") and len(server.requests) == 1


SITUATION_FIRST = (
    "We moved our database to a new disk last month, and since then the nightly reports take twice as long. "
    "The queries did not change. What could be the cause?"
)


async def test_auto_classifier_asks_the_llm_when_the_shipped_model_reads_no_question():
    """A question told as a situation first reads as a statement to the shipped model, sure of it (0.93): the typed
    plan was dropped for plain RAG on 10 of 36 held-out questions of issue 53 (docs/lab/2026-12-06-labelled-gaps.md).
    `auto` asks the LLM for those as for the unsure ones."""
    shipped = load_default_classifier()
    said = shipped.classify(SITUATION_FIRST)
    assert said.label is NFQType.NOT_A_QUESTION and said.confidence >= 0.6  # the case, not an unsure one
    with OpenAIStubServer(lambda r: Reply(content='{"type": "REASON"}')) as server:
        auto = AutoClassifier(
            shipped, LLMTypeClassifier(OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0))
        )
        asked = await auto.aclassify(SITUATION_FIRST)
        assert asked.label is NFQType.REASON and asked.source.startswith("llm:") and len(server.requests) == 1
        statement = await auto.aclassify("The cat sat on the mat.")  # the LLM decides those too
        assert statement.source.startswith("llm:") and len(server.requests) == 2


def test_auto_is_the_default_and_asks_an_llm_only_when_one_is_configured():
    from typedrag.config import Settings
    from typedrag.factory import build_classifier

    assert Settings().classifier == "auto"
    assert build_classifier(Settings(), None).name == load_default_classifier().name  # offline: the shipped model
    with OpenAIStubServer(lambda r: Reply(content='{"type": "REASON"}')) as server:
        model = OpenAIChatModel(model="stub", base_url=server.base_url, max_retries=0)
        assert isinstance(build_classifier(Settings(), model), AutoClassifier)
        assert build_classifier(Settings(classifier="shipped"), model).name == load_default_classifier().name


def test_rag_and_forced_types_do_not_need_the_classifier(small_index, monkeypatch):
    # Regression: the classifier was always built, so a classifier that cannot load (here: an LLM
    # classifier with no LLM configured) broke `--method rag` and `--type` too.
    monkeypatch.setenv("TYPEDRAG_CLASSIFIER", "llm")
    for extra in (["--method", "rag"], ["--type", "reason"]):
        out = runner.invoke(app, ["ask", "Why did the Western Roman Empire fall?", "--index", str(small_index), *extra])
        assert out.exit_code == 0, out.output
    out = runner.invoke(app, ["ask", "Why did the Western Roman Empire fall?", "--index", str(small_index)])
    assert out.exit_code == 2 and "needs an LLM endpoint" in out.output


def test_version_prints_the_version_and_exits_0():
    """Issue 35, F9: `typedrag --version` exited 2 (no such option)."""
    import typedrag

    out = runner.invoke(app, ["--version"])
    assert out.exit_code == 0, out.output
    assert out.stdout == f"typedrag {typedrag.__version__}\n"


def test_an_offline_ask_does_not_import_the_openai_sdk(small_index, tmp_path):
    """Issue 41 #7: `ask` imported the openai SDK (through typedrag/factory.py) even offline, where nothing uses
    it; under load its import took longer than the answer. An offline ask, streamed or as JSON, leaves it out."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from typedrag.cli import app\n"
        "try:\n"
        "    app(sys.argv[1:])\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print('openai SDK imported:', 'openai' in sys.modules, file=sys.stderr)\n"
    )
    for extra in ([], ["--json"]):
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                "ask",
                "Why did the Western Roman Empire fall?",
                "--index",
                str(small_index),
                *extra,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr
        assert "offline-extractive" in run.stdout
        assert "openai SDK imported: False" in run.stderr


def test_ask_in_a_folder_without_an_index_says_how_to_build_one_not_rebuild_it(tmp_path):
    """Issue 41 #15: a first-time user who never built an index was told to "re-run `typedrag index …` to rebuild it"."""
    out = runner.invoke(
        app, ["ask", "Why did the Western Roman Empire fall?"]
    )  # the default ./typedrag-index, which is not there
    assert out.exit_code == 2, out.output
    assert (
        "no index at typedrag-index: build one first with `typedrag index SOURCE... --index typedrag-index`"
        in out.output
    )
    assert "rebuild" not in out.output and "re-run" not in out.output


def test_ask_and_chat_keep_the_pipelines_notes_in_the_trace_not_under_every_answer(small_index):
    """Issue 41 #5: `ask` and `chat` printed "fallback at ..." lines after every answer without --trace (and a
    dropped aspect twice on a terminal); they are in --trace, /trace and the JSON, as recorded."""
    question = "Why did the Western Roman Empire fall?"
    recorded = json.loads(runner.invoke(app, ["ask", question, "--index", str(small_index), "--json"]).stdout)[
        "fallbacks"
    ]
    assert recorded  # there is something the pipeline noted
    plain = runner.invoke(app, ["ask", question, "--index", str(small_index)])
    assert plain.exit_code == 0 and "Sources" in plain.stdout
    assert "fallback" not in plain.output and not any(f["reason"][:30] in plain.output for f in recorded)
    traced = runner.invoke(app, ["ask", question, "--index", str(small_index), "--trace"])
    assert "fallback at" in traced.stdout and "steps: " in traced.stdout and "tokens 0+0" not in traced.stdout

    chat = runner.invoke(app, ["chat", "--index", str(small_index)], input=f"{question}\nAnd why did it matter?\n")
    assert chat.exit_code == 0 and chat.stdout.count("Sources") == 2, chat.output
    assert "fallback" not in chat.output
    chat = runner.invoke(app, ["chat", "--index", str(small_index)], input=f"{question}\n/trace\n")
    assert "fallback at" in chat.stdout  # what /trace prints


# --- one table of the options several commands take (typedrag.commands) ---------------------------------------


@pytest.mark.parametrize(
    ("command", "options"),
    [
        (["index"], ("IndexOpt", "BackendOpt", "UriOpt", "CollectionOpt", "TokenOpt")),
        (
            ["ask"],
            (
                "IndexOpt",
                "LLMOpt",
                "BaseUrlOpt",
                "ClassifierOpt",
                "BackendOpt",
                "UriOpt",
                "CollectionOpt",
                "RetrievalOpt",
            ),
        ),
        (["eval"], ("IndexOpt", "ClassifierOpt", "BackendOpt", "UriOpt", "CollectionOpt", "RetrievalOpt")),
        (["eval", "compare"], ("ClassifierOpt",)),
        (["eval", "retrieval"], ("IndexOpt", "BackendOpt", "UriOpt", "CollectionOpt")),
        (["serve"], ("IndexOpt", "LLMOpt", "BaseUrlOpt", "BackendOpt", "UriOpt", "CollectionOpt", "RetrievalOpt")),
    ],
)
def test_an_option_several_commands_take_reads_the_same_in_each(command, options):
    import typing

    from typedrag import commands

    shown = "".join(runner.invoke(app, [*command, "--help"], env={"COLUMNS": "250"}).output.split())
    for name in options:
        declared = typing.get_args(getattr(commands, name))[1]
        assert "".join(declared.help.split()) in shown, (command, name)


def test_ask_with_knowledge_labelled_prints_the_models_own_part_apart_and_an_unknown_value_is_one_line(small_index):
    def knowing(request):
        from typedrag.testing.openai_stub import default_content

        if request.schema_name == "LabelledAnswer":
            return Reply(
                content=json.dumps(
                    {
                        "from_sources": "Crocodiles have a V-shaped snout [1].",
                        "not_covered": "speed",
                        "from_own_knowledge": ["Crocodiles can gallop briefly."],
                    }
                )
            )
        return Reply(content=default_content(request))

    with OpenAIStubServer(knowing) as server:
        args = [
            "ask",
            "What is the difference between a crocodile and an alligator?",
            "--index",
            str(small_index),
            "--llm",
            "stub",
            "--base-url",
            server.base_url,
            "--method",
            "rag",
            "--knowledge",
            "labelled",
        ]
        out = runner.invoke(app, args)
        as_json = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    assert "Crocodiles have a V-shaped snout [1]." in out.stdout
    assert (
        out.stdout.index("Not from your documents:") > out.stdout.index("V-shaped snout")
        and "Crocodiles can gallop briefly." in out.stdout
    )
    result = json.loads(as_json.stdout)
    assert result["knowledge"] == "labelled" and result["unsourced"]["sentences"] == ["Crocodiles can gallop briefly."]
    bad = runner.invoke(app, ["ask", "Why?", "--index", str(small_index), "--knowledge", "everything"])
    assert bad.exit_code == 2 and "knowledge" in bad.output and "Traceback" not in bad.output


# --- issue 55: a newcomer's first hour ----------------------------------------------------------------------

GERMAN_FAQ = """# Häufige Fragen zur Kaffeemaschine

## Wie entkalke ich die Kaffeemaschine?

Füllen Sie den Wassertank mit einer Mischung aus Wasser und Zitronensäure. Lassen Sie die Maschine zwei Durchläufe ohne Kaffeepulver laufen. Spülen Sie danach dreimal mit klarem Wasser nach.

## Wie oft sollte man die Maschine reinigen?

Die Brühgruppe sollte einmal pro Woche unter fließendem Wasser gereinigt werden. Bei hartem Wasser ist eine monatliche Entkalkung nötig.
"""


@pytest.fixture(scope="module")
def german_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("german")
    (folder / "docs").mkdir()
    (folder / "docs" / "kaffeemaschine.md").write_text(GERMAN_FAQ, encoding="utf-8")
    built = runner.invoke(app, ["index", str(folder / "docs"), "--index", str(folder / "index")])
    assert built.exit_code == 0, built.output
    return folder / "index"


def test_ask_and_chat_print_the_answer_to_a_question_a_german_faqs_entry_is_filed_under(german_index):
    """Issue 55 E4: the entry under "Wie oft sollte man die Maschine reinigen?" answers that question (its heading
    reads as it), though the reader, trained on English, gives its German sentences a chance under its bar. The
    answer kept them, but the stream held them back on the reader's bar alone: `ask` and `chat` printed nothing
    where the JSON had the text."""
    question = "Wie oft sollte man die Maschine reinigen?"
    result = json.loads(runner.invoke(app, ["ask", question, "--index", str(german_index), "--json"]).stdout)
    assert not result["abstained"] and result["answer"].startswith("Die Brühgruppe sollte einmal pro Woche")
    printed = runner.invoke(app, ["ask", question, "--index", str(german_index)])
    assert printed.exit_code == 0 and result["answer"] in printed.stdout, printed.stdout
    chat = runner.invoke(app, ["chat", "--index", str(german_index)], input=f"{question}\n")
    assert chat.exit_code == 0 and result["answer"] in chat.stdout, chat.stdout


def test_index_says_skipped_once_per_line(tmp_path):
    """Issue 55 E12: "skipped docs/logo.png:1: unsupported file type (...), skipped": the reason says so itself."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The okapi lives in the rainforest of the Congo basin.\n")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (docs / "outside.txt").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("Not part of the corpus.\n")
    (docs / "empty.md").write_text("")
    out = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "index")], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    lines = [line.replace(str(tmp_path), "TMP") for line in out.stderr.splitlines()]  # the test's name holds "skipped"
    lines = [line for line in lines if "skipped" in line]
    assert len(lines) == 3, lines
    assert all(line.count("skipped") == 1 for line in lines), lines
    assert any(line.startswith("skipped TMP/docs/empty.md") for line in lines)  # a reason that does not say it


def test_index_counts_a_manuals_links_to_shared_assets_on_one_line(tmp_path):
    """Indexing Debian's borgbackup-doc printed 19 lines of "symbolic link to a file outside the corpus folder,
    skipped", one per style sheet, script and font its _static folder links to /usr/share/javascript: past five,
    such links are one line counted by suffix, as files of types typedrag does not read are."""
    shared, docs = tmp_path / "shared", tmp_path / "docs"
    shared.mkdir()
    (docs / "_static").mkdir(parents=True)
    (docs / "index.txt").write_text("The okapi lives in the rainforest of the Congo basin.\n")
    for name in ("jquery.js", "doctools.js", "a.css", "b.css", "c.css", "font.ttf"):
        (shared / name).write_text("/* shared */\n")
        (docs / "_static" / name).symlink_to(shared / name)
    for n in range(6):
        (docs / "_static" / f"img{n}.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    out = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "index")], env={"COLUMNS": "400"})
    assert out.exit_code == 0, out.output
    lines = [line for line in out.stderr.splitlines() if line.startswith("skipped")]
    assert lines == [
        "skipped 6 files of types typedrag does not read: .png 6",
        "skipped 6 symbolic links to files outside the corpus folder (not read; --follow-links reads them): .css 3, "
        ".js 2, .ttf 1",
    ], out.stderr
    (docs / "_static" / "font.ttf").unlink()  # five: each by name, as before
    out = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "index2")], env={"COLUMNS": "400"})
    assert sum("symbolic link to a file outside the corpus folder" in line for line in out.stderr.splitlines()) == 5


def test_follow_links_reads_a_doc_packages_linked_manuals_and_a_sync_keeps_following(tmp_path):
    """`typedrag index /usr/share/doc/bash-doc` indexed only its copyright file: Debian's doc packages link their
    manuals from another package's folder (bashref.html -> ../bash/bashref.html), and a link leading out of the
    folder is skipped. The skip now says how to read them; --follow-links does, is recorded, and a sync keeps it.
    The passage's original is served from where the link leads, only while it is the file indexed."""
    from typedrag.config import LibraryLimits
    from typedrag.index import open_retriever
    from typedrag.library.store import Collection

    real, docs = tmp_path / "bash", tmp_path / "bash-doc"
    (real / "examples").mkdir(parents=True)
    docs.mkdir()
    (real / "bashref.html").write_text(
        "<html><head><title>Bash Reference</title></head><body><h1>Brace Expansion</h1>"
        "<p>Brace expansion generates arbitrary strings from a pattern such as a{b,c}d.</p></body></html>"
    )
    (real / "examples" / "loops.txt").write_text("Loop over files with a for loop and a glob.\n")
    (docs / "bashref.html").symlink_to("../bash/bashref.html")
    (docs / "examples").symlink_to("../bash/examples")
    (docs / "copyright").write_text("Copyright the Free Software Foundation.\n")
    plain = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / "plain")], env={"COLUMNS": "400"})
    assert plain.exit_code == 0, plain.output
    assert "indexed 1 documents" in plain.output
    assert (
        f"{docs / 'bashref.html'}:1: symbolic link to a file outside the corpus folder (--follow-links reads it), skipped"
        in plain.stderr
    )
    assert (
        f"{docs / 'examples'}: symbolic link to a folder outside the corpus folder (--follow-links reads it), skipped"
        in plain.stderr
    )

    index = tmp_path / "followed"
    out = runner.invoke(app, ["index", str(docs), "--index", str(index), "--follow-links", "--retrieval", "bm25"])
    assert out.exit_code == 0, out.output
    manifest = json.loads((index / "manifest.json").read_text())
    assert manifest["corpus"]["filters"] == {"include": [], "exclude": [], "follow_links": True}
    assert sorted(manifest["corpus"]["files"]) == ["bashref.html", "copyright", "examples/loops.txt"]
    found = open_retriever(index).search("brace expansion pattern", 1)[0]
    assert found.passage_id.startswith("bashref.html#")
    # a sync without the flag keeps following, and sees a change where the link leads
    (real / "examples" / "loops.txt").write_text("Loop over lines of a file with while read.\n")
    synced = runner.invoke(app, ["index", str(docs), "--index", str(index)])
    assert synced.exit_code == 0, synced.output
    assert "read what symbolic links lead to outside the folders (--follow-links)" in synced.stderr
    assert "added 0, updated 1, removed 0, unchanged 2" in synced.output
    # the viewer's original: the linked file, while it is the one indexed
    collection = Collection("default", index, None, LibraryLimits())
    collection.retriever = open_retriever(index)
    path, why = collection.original("bashref.html", manifest["corpus"]["files"]["bashref.html"]["sha256"])
    assert (path, why) == (docs / "bashref.html", None)
    assert collection.original("bashref.html", "0" * 64)[0] is None


def test_one_document_in_several_formats_is_read_once_in_the_format_read_best(tmp_path):
    """Debian ships many manuals in several renderings side by side (claws-mail-manual.html, .pdf.gz and .txt.gz;
    bashref.html and bashref.pdf; Node's api/fs.md and api/fs.html: 83 such groups in /usr/share/doc here), and
    each was indexed in full, every passage two or three times over. One rendering is read, the one whose
    structure reads best, the others reported by name; --all-formats reads them all; --include decides first."""
    import gzip

    docs = tmp_path / "manual"
    (docs / "api").mkdir(parents=True)
    text = "The okapi lives in the rainforest of the Congo basin and eats leaves."
    (docs / "guide.html").write_text(f"<html><head><title>Guide</title></head><body><p>{text}</p></body></html>")
    (docs / "guide.txt.gz").write_bytes(gzip.compress(f"{text}\n".encode()))
    (docs / "guide.md").write_text(f"# Guide\n\n{text}\n")
    (docs / "api" / "fs.md").write_text("# fs\n\nThe fs module reads and writes files.\n")
    (docs / "api" / "fs.html").write_text("<html><body><p>The fs module reads and writes files.</p></body></html>")
    (docs / "api" / "net.md").write_text("# net\n\nThe net module opens sockets.\n")
    (docs / "notes.txt").write_text("Feeding times are posted at the gate.\n")

    def build(name: str, *options: str):
        out = runner.invoke(app, ["index", str(docs), "--index", str(tmp_path / name), "--retrieval", "bm25", *options])
        assert out.exit_code == 0, out.output
        return sorted(json.loads((tmp_path / name / "manifest.json").read_text())["corpus"]["files"]), out.stderr

    files, stderr = build("once")
    assert files == ["api/fs.html", "api/net.md", "guide.html", "notes.txt"]
    assert (
        f"{docs / 'api' / 'fs.md'}: the same document as fs.html in another format (--all-formats reads every one), skipped"
        in stderr
    )
    assert f"{docs / 'guide.md'}: the same document as guide.html in another format" in stderr
    assert f"{docs / 'guide.txt.gz'}: the same document as guide.html in another format" in stderr
    for n in range(6):  # past five, one line counted by ending: a gzipped rendering by its own (".txt.gz")
        (docs / f"page{n}.html").write_text(f"<html><body><p>Page {n} of the okapi guide.</p></body></html>")
        (docs / f"page{n}.txt.gz").write_bytes(gzip.compress(f"Page {n} of the okapi guide.\n".encode()))
    _, stderr = build("grouped")
    assert (
        "skipped 9 renderings of documents read in a better format (--all-formats reads every one): .txt.gz 7, .md 2"
        in stderr
    )
    for n in range(6):
        (docs / f"page{n}.html").unlink()
        (docs / f"page{n}.txt.gz").unlink()
    files, _ = build("every", "--all-formats")
    assert files == ["api/fs.html", "api/fs.md", "api/net.md", "guide.html", "guide.md", "guide.txt.gz", "notes.txt"]
    files, _ = build("chosen", "--exclude", "*.html")  # the filters choose first: the Markdown is read best then
    assert files == ["api/fs.md", "api/net.md", "guide.md", "notes.txt"]


def test_the_readmes_first_command_leaves_only_the_index_behind(tmp_path):
    """Issue 55 E12: `typedrag index demo:vital-articles --index demo-index` left `.demo-index.lock` beside the index,
    untracked in the user's checkout: the build's lock file is removed when the build ends."""
    out = runner.invoke(
        app, ["index", "demo:vital-articles", "--index", "demo-index"]
    )  # the autouse fixture's cwd is tmp_path
    assert out.exit_code == 0, out.output
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["demo-index"]


def test_a_file_given_as_the_index_is_named_as_a_file_not_an_index_to_build(tmp_path):
    """Issue 55 E12: `--index manual.pdf` said "no index at manual.pdf: build one first"."""
    document = tmp_path / "manual.txt"
    document.write_text("How to sort socks.\n")
    out = runner.invoke(app, ["ask", "How do I sort socks?", "--index", str(document)])
    assert out.exit_code == 2, out.output
    message = " ".join(out.output.split())
    assert (
        f"{document} is a file, not an index" in message
        and f"typedrag index {document} --index typedrag-index" in message
    )
    assert "no index at" not in message and "Traceback" not in message

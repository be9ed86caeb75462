"""Each framework's example in docs/integrations.md runs as is, in an empty folder, with the network refused,
and prints a typed answer with its type and numbered sources."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import network_guard

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "integrations.md"
FRAMEWORKS = {"LangChain": "langchain_core", "LlamaIndex": "llama_index.core", "Haystack": "haystack"}
TYPES = "EVIDENCE-BASED|COMPARISON|EXPERIENCE|REASON|INSTRUCTION|DEBATE"


def blocks() -> dict[str, str]:
    """The first python block under each framework's heading."""
    sections = re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]
    found = {}
    for section in sections:
        heading, _, body = section.partition("\n")
        code = re.search(r"```python\n(.*?)```", body, re.S)
        if code and heading.strip() in FRAMEWORKS:
            found[heading.strip()] = code.group(1)
    return found


def test_the_doc_has_one_block_per_framework():
    assert set(blocks()) == set(FRAMEWORKS)


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_the_example_runs_offline_in_an_empty_folder(framework, tmp_path):
    pytest.importorskip(FRAMEWORKS[framework])
    script = tmp_path / "example.py"
    script.write_text(blocks()[framework])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TYPEDRAG_", "OPENAI_", "HAYSTACK_", "NLTK_", "TIKTOKEN_"))
    }
    env.update(HOME=str(tmp_path), HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # the checkout under test, when it is not the installed one
    done = subprocess.run(
        [sys.executable, str(HERE / "network_guard.py"), str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert network_guard.BLOCKED not in done.stderr, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert re.search(rf"^type: ({TYPES}) -> plan: \w+", done.stdout, re.M), done.stdout
    cited = [line for line in lines if re.match(r"^\[\d+\] \S", line)]
    assert cited and re.search(r"\[\d+\]", lines[1]), done.stdout  # the answer cites, the sources are listed

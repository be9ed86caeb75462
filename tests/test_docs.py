"""The docs hold together: the configuration page is what the settings generate, every figure the README states links
to a section of BENCHMARKS.md, every such section names its command, machine, date, commit and lab note, and every
relative link in the README, BENCHMARKS.md and docs/ reaches a file and a heading that exist."""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gen_config_doc  # noqa: E402

from typedrag.config import load_settings  # noqa: E402

README = ROOT / "README.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
RECENT = "## Recent runs (to be folded in)"  # branches append their runs below it; the lead folds them in
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"#{1,6} (.*)", line)):
            base, n = slug(match.group(1)), 0
            while (f"{base}-{n}" if n else base) in found:
                n += 1
            found.add(f"{base}-{n}" if n else base)
    return found


def sections(text: str) -> dict[str, str]:
    """The `## ` sections of a page, by heading, code blocks not split."""
    out: dict[str, str] = {}
    heading, body, in_code = None, [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("## "):
            if heading is not None:
                out[heading] = "\n".join(body)
            heading, body = line[3:], []
        elif heading is not None:
            body.append(line)
    if heading is not None:
        out[heading] = "\n".join(body)
    return out


def claim_sections() -> dict[str, str]:
    """BENCHMARKS.md's sections of current figures: those above the heading branches append their runs below."""
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert RECENT in text, "BENCHMARKS.md keeps its last heading for runs to be folded in"
    return sections(text.split(RECENT, 1)[0])


def test_the_configuration_page_is_what_the_settings_generate():
    page = ROOT / "docs" / "configuration.md"
    assert page.read_text(encoding="utf-8") == gen_config_doc.render(), "run: python scripts/gen_config_doc.py"


def test_the_configuration_page_names_every_setting_and_variable():
    from typedrag.config import _ENV

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for variable in _ENV:
        assert f"`{variable}`" in text, variable
    for key in ("`index`", "`llm.model`", "`judge.api_key`", "`library.upload_types`", "`TYPEDRAG_EMBED_THREADS`"):
        assert key in text, key


def test_the_configuration_pages_example_is_a_valid_config_file(tmp_path, monkeypatch):
    example = re.search(r"```toml\n(.*?)```", (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8"), re.S)
    (tmp_path / "typedrag.toml").write_text(example.group(1), encoding="utf-8")
    monkeypatch.setenv("TYPEDRAG_CONFIG", str(tmp_path / "typedrag.toml"))
    settings = load_settings(env={})
    assert settings.llm.model == "gpt-4o-mini" and settings.llm.max_reply_chars == 100_000


def test_every_figure_the_readme_states_links_to_its_benchmarks_section():
    status = sections(README.read_text(encoding="utf-8"))["Status"]
    items = re.split(r"\n(?=- )", status.split("\n- ", 1)[1])
    assert len(items) >= 5
    claimed = {slug(heading) for heading in claim_sections()}
    for item in items:
        targets = [t.split("#", 1)[1] for t in LINK.findall(item) if t.startswith("BENCHMARKS.md#")]
        assert targets, f"a figure without its BENCHMARKS.md section: {item[:80]}"
        assert set(targets) <= claimed, (targets, item[:80])


def test_every_benchmarks_section_names_its_command_machine_date_commit_and_note():
    claims = claim_sections()
    assert len(claims) >= 8
    for heading, body in claims.items():
        assert not re.match(r"\d", heading), f"sections are named by their claim, not numbered: {heading}"
        assert "```bash\n" in body, f"{heading}: no command"
        assert "Machine" in body, f"{heading}: no machine"
        assert re.search(r"20\d\d-\d\d-\d\d", body), f"{heading}: no date"
        assert re.search(r"commit", body), f"{heading}: no commit"
        assert "docs/lab/20" in body, f"{heading}: no lab note"


MARKDOWN = [README, BENCHMARKS, *sorted((ROOT / "docs").glob("*.md")), ROOT / "docs" / "lab" / "README.md"]


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_a_heading(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved), f"{page.name}: {target}"

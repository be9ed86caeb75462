"""The report of a comparison: summary.json, report.md, a chart of wins by type, and report.html (all of it
in one self-contained page, every question with both answers and the judge's reasons).

Everything that came from a model or a user's file is escaped in the HTML: answers and questions are data.
"""

from __future__ import annotations

import base64
import html
import json
import textwrap
from pathlib import Path
from typing import Any

CHART = "compare-by-type.png"
OUTCOME_WORDS = {"tie": "tie", "judge failed": "judge failed", "no answer": "no answer", None: "not judged"}


def write_compare_report(out: Path, summary: dict[str, Any]) -> dict[str, Path]:
    """Write the report files; the chart is optional (a drawing failure is one line in the notes)."""
    files = {
        "summary": out / "summary.json",
        "markdown": out / "report.md",
        "chart": out / CHART,
        "html": out / "report.html",
    }
    missing = draw_compare_chart(summary, files["chart"])
    if missing:
        files.pop("chart")
        summary = {**summary, "notes": summary["notes"] + [f"no chart: {missing}"]}
    summary = {**summary, "files": {k: p.name for k, p in files.items()}, "chart_missing": missing}
    files["markdown"].write_text(markdown(summary), encoding="utf-8")
    files["html"].write_text(html_page(summary, files.get("chart")), encoding="utf-8")
    files["summary"].write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return files


def groups(summary: dict[str, Any]) -> list[tuple[str, dict]]:
    """(label, tally) for every type, then all."""
    return list(summary["by_type"].items()) + [("all", summary["overall"])]


def share_text(tally: dict) -> str:
    """b's share of the decided items with its 95% interval, e.g. `0.82 [0.60, 0.94]`, or `–`."""
    if tally["share_b_of_decided"] is None:
        return "–"
    return f"{tally['share_b_of_decided']:.2f} [{tally['share_b_low']:.2f}, {tally['share_b_high']:.2f}]"


def verdict_line(summary: dict[str, Any]) -> str:
    """One sentence a person reads first: who is ahead overall, and whether the interval separates them."""
    a, b, tally = summary["a"], summary["b"], summary["overall"]
    if summary["judge"] is None:
        differ = tally["items"] - tally["identical"] - tally["failures"]
        return (
            f"{differ} of {tally['items']} questions got different answers from {a} and {b} (not judged: no LLM judge)."
        )
    wins_a, wins_b = tally["wins_a"], tally["wins_b"]
    if wins_a == wins_b:
        lead = f"{a} and {b} are level, {wins_b}–{wins_a}"
    else:
        leader = b if wins_b > wins_a else a
        lead = f"{leader} is preferred, {max(wins_a, wins_b)}–{min(wins_a, wins_b)}"
    lead += f" with {tally['ties']} ties ({tally['identical']} identical)"
    if tally["failures"]:
        lead += f" and {tally['failures']} not judged"
    if tally["share_b_of_decided"] is None:
        return lead + "."
    sure = (
        "the 95% interval excludes an even split"
        if tally["separated"]
        else "the 95% interval includes an even split: not separated"
    )
    return f"{lead}; {b}'s share of the decided items {share_text(tally)}: {sure}."


def table_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The summary table as (header, rows) of text: the terminal, Markdown and HTML show the same numbers."""
    a, b = summary["a"], summary["b"]
    if summary["judge"] is None:
        header = ["type", "questions", "identical", "differ", "no answer"]
        rows = [
            [
                label,
                str(t["items"]),
                str(t["identical"]),
                str(t["items"] - t["identical"] - t["failures"]),
                str(t["failures"]),
            ]
            for label, t in groups(summary)
        ]
        return header, rows
    header = [
        "type",
        "questions",
        f"{a} wins",
        f"{b} wins",
        "ties",
        "not judged",
        f"{b} share of decided [95%]",
        f"satisfied {a} / {b}",
        f"answering {a} / {b}",
        f"noise {a} / {b}",
        "orders agree",
    ]
    rows = []
    for label, t in groups(summary):
        judged = t["wins_a"] + t["wins_b"] + t["ties"] - t["identical"]
        rows.append(
            [
                label,
                str(t["items"]),
                str(t["wins_a"]),
                str(t["wins_b"]),
                f"{t['ties']} ({t['identical']} same)",
                str(t["failures"]),
                share_text(t),
                f"{_n(t['satisfies_a'])} / {_n(t['satisfies_b'])}",
                f"{_n(t['answering_a'])} / {_n(t['answering_b'])}",
                f"{_n(t['noise_a'])} / {_n(t['noise_b'])}",
                f"{t['consistent_orders']}/{judged}" if judged else "–",
            ]
        )
    return header, rows


def terminal_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The table narrowed for a terminal: wins, ties, the interval, satisfied and noise (the files have the rest)."""
    header, rows = table_rows(summary)
    if summary["judge"] is None:
        return header, rows
    keep = [0, 1, 2, 3, 4, 6, 7, 9]
    short = ["type", "n", summary["a"], summary["b"], "ties", "share [95%]", "satisfied", "noise"]
    return short, [[row[i].split(" (")[0] if i == 4 else row[i] for i in keep] for row in rows]


def _n(value: float) -> str:
    """A count averaged over two orders: whole numbers plain, halves with one decimal."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def markdown(summary: dict[str, Any]) -> str:
    header, rows = table_rows(summary)
    lines = [
        f"# {summary['a']} vs {summary['b']}: {Path(summary['questions_file']).name}",
        "",
        verdict_line(summary),
        "",
    ]
    lines += _setup_lines(summary)
    lines += ["", f"## By question type ({summary['type_source']})", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    linkage = summary.get("linkage")
    if linkage:
        lines += [
            "",
            f"## LINKAGE against your references ({linkage['questions']} questions, judge {linkage['judge']})",
            "",
        ]
        lines += ["| system | type | MRR | MPR | scored | failed |", "|---|---|---|---|---|---|"]
        for cell in linkage["cells"]:
            mrr = "–" if cell["mrr"] is None else f"{cell['mrr']:.3f}"
            mpr = "–" if cell["mpr"] is None else f"{cell['mpr']:.1f}"
            lines.append(
                f"| {cell['method']} | {cell['type']} | {mrr} | {mpr} | {cell['scored']} | {cell['failures']} |"
            )
    lines += ["", "## Notes", ""] + [f"- {note}" for note in _notes(summary)]
    return "\n".join(lines) + "\n"


def _setup_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for name, system in summary["systems"].items():
        where = f", index {system['index']}" if system.get("index") else ""
        lines.append(
            f"- **{name}**: {system['described']} (method {system['method']}, generator {system['generator']}{where}, "
            f"top_k {system['top_k']}, classifier {system['classifier']})"
        )
    judge = summary["judge"]
    lines.append(f"- Judge: {judge['name']}, blind, {judge['orders']}" if judge else "- Judge: none")
    lines.append(
        f"- Questions: {summary['questions_selected']} of {summary['questions_in_file']} in {summary['questions_file']}"
    )
    return lines


def _notes(summary: dict[str, Any]) -> list[str]:
    notes = list(summary["notes"])
    if summary["judge"] is not None:
        notes += [
            "An item is won when its two orders together favour one system (both, or one and a tie); orders that "
            "contradict each other make a tie. 'orders agree' counts items whose two orders named the same outcome.",
            f"{summary['b']} share of decided: its wins over all won items (ties left out), with a Wilson 95% interval.",
            "satisfied / answering / noise: the judge's reading of each answer (would it alone satisfy the asker; "
            "its sentences that answer; its off-topic, misleading or nonsensical ones), averaged over the two orders.",
        ]
    linkage = summary.get("linkage")
    if linkage and linkage["single_reference_questions"]:
        notes.append(
            f"{linkage['single_reference_questions']} questions have one reference grade: LINKAGE can only place "
            "an answer above or below it, so it separates systems little there."
        )
    notes.append(
        f"{len(summary['errors_this_run'])} errors in this run"
        + (": " + "; ".join(summary["errors_this_run"][:5]) if summary["errors_this_run"] else "")
    )
    return notes


def draw_compare_chart(summary: dict[str, Any], path: Path) -> str | None:
    """The chart of outcomes by type; None when drawn, else one line saying why not (no file left behind)."""
    try:
        _chart(summary, path)
    except ImportError as error:
        reason = f"matplotlib could not be imported ({error}); reinstall typedrag (pip install typedrag) to get it"
    except Exception as error:  # noqa: BLE001 - the tables do not depend on the chart
        reason = f"drawing failed: {type(error).__name__}: {error}"
    else:
        return None
    if path.is_file():
        path.unlink()
    return " ".join(reason.split())


def _chart(summary: dict[str, Any], path: Path) -> None:
    """Horizontal bars per type: a's wins, ties, b's wins as shares of the questions, counts written in."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = summary["a"], summary["b"]
    rows = groups(summary)
    judged = summary["judge"] is not None
    if judged:
        parts = [
            (f"{a} wins", "wins_a", "#4C72B0"),
            ("tie", "ties", "#C9C9C9"),
            (f"{b} wins", "wins_b", "#DD8452"),
            ("not judged", "failures", "#F2F2F2"),
        ]
    else:
        parts = [
            ("identical", "identical", "#C9C9C9"),
            ("differ", None, "#8172B3"),
            ("no answer", "failures", "#F2F2F2"),
        ]
    width = 7.5
    figure, axes = plt.subplots(figsize=(width, 1.6 + 0.45 * len(rows)), dpi=120, layout="constrained")
    for y, (label, tally) in enumerate(rows):
        left = 0.0
        total = max(tally["items"], 1)
        for name, key, colour in parts:
            count = tally[key] if key else tally["items"] - tally["identical"] - tally["failures"]
            share = count / total
            axes.barh(y, share, left=left, color=colour, edgecolor=_edge(colour), label=name if y == 0 else None)
            if count:
                axes.text(left + share / 2, y, str(count), ha="center", va="center", fontsize=8)
            left += share
        if judged and tally["share_b_of_decided"] is not None:
            axes.text(1.02, y, share_text(tally), va="center", fontsize=7)
    axes.set_yticks(range(len(rows)), [f"{label.lower()} (n={t['items']})" for label, t in rows], fontsize=8)
    axes.set_xlim(0, 1)
    axes.set_xlabel("share of the questions")
    axes.invert_yaxis()
    title = (
        f"{a} vs {b}, judged blind in both orders by {summary['judge']['name']}"
        if judged
        else f"{a} vs {b}: where the answers differ (no judge)"
    )
    axes.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=9, loc="left")
    if judged:
        axes.annotate(f"{b} share of decided [95%]", xy=(1.02, -0.6), xycoords=("axes fraction", "data"), fontsize=7)
    figure.legend(fontsize=7, ncol=len(parts), loc="outside lower center", frameon=False)
    figure.savefig(path, bbox_inches="tight")  # tight: the title, labels and legend are measured, never cut off
    plt.close(figure)


def _edge(colour: str) -> str:
    """A bar's edge: white between bars, grey around a bar as pale as the page ("no answer", "not judged"), whose
    legend swatch would otherwise not show on white."""
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#999999" if min(red, green, blue) > 0xE0 else "white"


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.lead { font-size: 1.1rem; font-weight: 600; }
.answers { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.answer { white-space: pre-wrap; background: #fafafa; border: 1px solid #ddd; padding: 0.5rem; }
details { margin: 0.3rem 0 1rem; }
.small { color: #555; font-size: 0.85rem; }
"""


def html_page(summary: dict[str, Any], chart: Path | None) -> str:
    """The whole report as one HTML page: verdict, set-up, table, chart, notes, then every question."""
    e = html.escape
    a, b = summary["a"], summary["b"]
    header, rows = table_rows(summary)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{e(a)} vs {e(b)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{e(a)} vs {e(b)}</h1>",
        f"<p class='lead'>{e(verdict_line(summary))}</p>",
        "<ul>"
        + "".join(f"<li>{e(line.removeprefix('- ').replace('**', ''))}</li>" for line in _setup_lines(summary))
        + "</ul>",
        f"<h2>By question type <span class='small'>({e(summary['type_source'])})</span></h2>",
        "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>",
        *("<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>" for row in rows),
        "</table>",
    ]
    if chart is not None and chart.is_file():
        data = base64.b64encode(chart.read_bytes()).decode("ascii")
        parts.append(f"<img alt='outcomes by question type' src='data:image/png;base64,{data}'>")
    linkage = summary.get("linkage")
    if linkage:
        parts.append(
            "<h2>LINKAGE against your references</h2><table><tr><th>system</th><th>type</th><th>MRR</th><th>MPR</th><th>scored</th><th>failed</th></tr>"
        )
        for cell in linkage["cells"]:
            mrr = "–" if cell["mrr"] is None else f"{cell['mrr']:.3f}"
            mpr = "–" if cell["mpr"] is None else f"{cell['mpr']:.1f}"
            parts.append(
                f"<tr><td>{e(cell['method'])}</td><td>{e(cell['type'])}</td><td>{mrr}</td><td>{mpr}</td>"
                f"<td>{cell['scored']}</td><td>{cell['failures']}</td></tr>"
            )
        parts.append("</table>")
    parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(note)}</li>" for note in _notes(summary)) + "</ul>")
    parts.append("<h2>Questions</h2>")
    for item in summary["items"]:
        parts.append(_item_html(item, a, b))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _item_html(item: dict[str, Any], a: str, b: str) -> str:
    e = html.escape
    names = {"a": a, "b": b}
    outcome = item["outcome"]
    said = f"{names[outcome]} preferred" if outcome in names else OUTCOME_WORDS.get(outcome, str(outcome))
    if item["identical"]:
        said = "identical answers"
    rounds = "".join(
        f"<li>order {r['round']} ({e(names[r['shown_first']])} shown first): "
        f"{e(names[r['winner']] + ' better' if r['winner'] in names else 'tie')}: {e(r['reason'])} "
        f"<span class='small'>({e(a)}: answers {r['a']['answering']}, noise {r['a']['noise']}, "
        f"{'satisfies' if r['a']['satisfies'] else 'does not satisfy'}; {e(b)}: answers {r['b']['answering']}, "
        f"noise {r['b']['noise']}, {'satisfies' if r['b']['satisfies'] else 'does not satisfy'})</span></li>"
        for r in item["rounds"]
    )
    answers = "".join(
        f"<div><b>{e(names[key])}</b> <span class='small'>{e(item['strategies'][key] or '')}</span>"
        f"<div class='answer'>{e(item['answers'][key] if item['answers'][key] is not None else '(no answer)')}</div></div>"
        for key in "ab"
    )
    return (
        f"<h3 id='{e(item['id'])}'>{e(item['question'])}</h3>"
        f"<p class='small'>{e(item['id'])} · {e(item['type'].lower())} · <b>{e(said)}</b></p>"
        + (f"<ul>{rounds}</ul>" if rounds else "")
        + f"<details{' open' if not item['identical'] else ''}><summary>both answers</summary><div class='answers'>{answers}</div></details>"
    )

"""Reports of a run: a Markdown and a CSV table shaped like the paper's Table 3 (rows: methods;
columns: source datasets and types, MRR and MPR), a bar chart of MPR by type and method (like its
Figure 4), and summary.json with the resolved configuration, counts and usage.

Proxy-judge runs write to differently named files (`*-proxy.*`) with `proxy-MRR`/`proxy-MPR`
columns, so their numbers can never be mistaken for, or merged with, LLM-judge numbers.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from typedrag.evaluation import paper
from typedrag.evaluation.metrics import ALL
from typedrag.nfq import NFQType

METHOD_NAMES = {"llm": "LLM", "rag": "RAG", "typed": "Typed-RAG"}
CONVENTIONS = {
    "linkage": "linkage (original LINKAGE: a candidate worse than all n references ranks n+1)",
    "typed-rag": "typed-rag (the Typed-RAG paper's variant: a candidate worse than all n references ranks n)",
}


def output_files(run_dir: Path, proxy: bool) -> dict[str, Path]:
    s = "-proxy" if proxy else ""
    return {
        "markdown": run_dir / f"results{s}.md",
        "csv": run_dir / f"results{s}.csv",
        "chart": run_dir / f"mpr-by-type{s}.png",
        "summary": run_dir / f"summary{s}.json",
    }


def write_report(run_dir: Path, summary: dict[str, Any]) -> dict[str, Path]:
    config = summary["configuration"]
    proxy = config["judge"]["kind"] == "proxy"
    files = output_files(run_dir, proxy)
    table = _Table(summary, proxy)
    files["markdown"].write_text(table.markdown(), encoding="utf-8")
    with files["csv"].open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows(table.csv_rows())
    chart_missing = draw_chart(table, files["chart"]) or table.inseparable()
    if chart_missing:  # the tables stand without it; say why it is missing where the numbers are read
        if files["chart"].is_file():  # drawn, but its bars would say nothing
            files["chart"].unlink()
        files.pop("chart")
        files["markdown"].write_text(table.markdown([f"no chart: {chart_missing}"]), encoding="utf-8")
    summary = {**summary, "files": {k: p.name for k, p in files.items()}, "chart_missing": chart_missing}
    if table.beside_paper():
        summary["paper"] = {
            "table": paper.PAPER,
            "setting": paper.SETTING,
            "rank_convention": paper.CONVENTION,
            "figures": paper.carried_over(),
        }
    files["summary"].write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return files


class _Table:
    """The run's cells arranged by method, source and type; unavailable methods stay as n/a rows."""

    def __init__(self, summary: dict[str, Any], proxy: bool) -> None:
        self.summary = summary
        self.config = summary["configuration"]
        self.proxy = proxy
        self.metrics = ("proxy-MRR", "proxy-MPR") if proxy else ("MRR", "MPR")
        self.cells = {(c["method"], c["source"], c["type"]): c for c in summary["cells"]}
        self.methods = list(dict.fromkeys(self.config["requested_methods"]))
        self.run_methods = set(self.config["methods"])
        self.sources = sorted({c["source"] for c in summary["cells"]} - {ALL})
        present = {c["type"] for c in summary["cells"]}
        self.types = [t.value for t in NFQType if t.value in present]
        self.type_header = f"type (predicted by {self.config['classifier']})"

    def inseparable(self) -> str | None:
        """Why a chart would show nothing (None: it shows something): every method that ran scored the same in every
        group, so its bars would be equal, or all of zero height (the offline proxy judge, ranking answers by their
        similarity to references, often cannot tell methods apart)."""
        methods = [m for m in self.methods if m in self.run_methods]
        groups = [
            [
                self.cells[(m, ALL, g)]["mpr"]
                for m in methods
                if (m, ALL, g) in self.cells and self.cells[(m, ALL, g)]["mpr"] is not None
            ]
            for g in [*self.types, ALL]
        ]
        values = [v for group in groups for v in group]
        if not values:
            return None
        all_zero = all(v == 0 for v in values)
        if not all_zero and (len(methods) < 2 or any(len(set(group)) > 1 for group in groups)):
            return None
        metric = self.metrics[1]
        same = (
            f"every method scored {metric} 0 in every group"
            if all_zero
            else f"every method scored the same {metric} in every group"
        )
        judged = (
            (
                "the offline proxy judge (similarity to the references) cannot separate the methods on these questions; "
                "judge with an LLM (--judge MODEL) to compare them"
            )
            if self.proxy
            else "the judge did not separate the methods"
        )
        return f"{same} ({', '.join(dict.fromkeys(f'{v:.1f}' for v in values))}): {judged}; a chart of equal bars would say nothing"

    def values(self, method: str, source: str, type_: str, for_csv: bool = False) -> tuple[str, str]:
        """(MRR, MPR) as text: rounded for reading, or at full precision (blank when empty) for CSV."""
        if method not in self.run_methods:
            return "n/a", "n/a"
        cell = self.cells.get((method, source, type_))
        if cell is None or cell["mrr"] is None:
            return ("", "") if for_csv else ("–", "–")
        if for_csv:
            return f"{cell['mrr']:.6g}", f"{cell['mpr']:.6g}"
        return f"{cell['mrr']:.3f}", f"{cell['mpr']:.1f}"

    def counts(self, method: str, source: str, type_: str) -> str:
        if method not in self.run_methods:
            return "n/a"
        cell = self.cells.get((method, source, type_))
        return f"{cell['scored']}/{cell['failures']}" if cell else "0/0"

    def columns(self) -> list[tuple[str, str, str]]:
        """(label, source, type) for every column group: each source, all, then each type."""
        return [(s, s, ALL) for s in self.sources] + [("all", ALL, ALL)] + [(t, ALL, t) for t in self.types]

    def markdown(self, extra_notes: list[str] = ()) -> str:
        c = self.config
        mrr, mpr = self.metrics
        judge = c["judge"]
        lines = [f"# LINKAGE evaluation: {Path(c['dataset']).name}", ""]
        if self.proxy:
            lines += [
                (
                    f"> **Judge: {judge['name']}.** {mrr}/{mpr} come from embedding similarity to the references, "
                    "not from an LLM judge; do not compare them with LLM-judge MRR/MPR."
                ),
                "",
            ]
        index = c["index"] or {}
        lines += [
            f"- Judge: {judge['name']}" + ("" if self.proxy else f" (temperature {judge['temperature']})"),
            f"- Generator: {c['generator']['engine']}",
            (
                f"- Questions: {c['questions_selected']} of {c['questions_in_dataset']} "
                f"(limit {c['limit']}, seed {c['seed']}, types {', '.join(c['types']) or 'all'}; {c['selection']})"
            ),
            f"- Rank convention: {CONVENTIONS[c['rank_convention']]}",
            f"- Rounds: {c['rounds']}; {c['round_aggregation']}",
            f"- Index: {index.get('path', 'none')}",
            f"- Knowledge: {c.get('knowledge', 'documents')}"
            + (
                " (where the documents do not cover a question, the generator may add what it knows, labelled)"
                if c.get("knowledge") == "labelled"
                else ""
            ),
            f"- {mrr} = mean(1/rank); {mpr} = mean((1 - (rank - 1)/|R|) x 100), |R| = references per question",
            "",
            "## By source dataset",
            "",
        ]
        by_source = [col for col in self.columns() if col[2] == ALL]
        lines += self._metric_table("Method", by_source)
        lines += self.paper_section()
        lines += ["", f"## By {self.type_header}", ""]
        by_type = [col for col in self.columns() if col[1] == ALL and col[2] != ALL]
        lines += self._metric_table(f"Method \\ {self.type_header}", by_type)
        lines += ["", "## Questions scored / failed (no answer, or no parsable verdict)", ""]
        header = ["Method"] + [label for label, _, _ in self.columns()]
        lines += [_row(header), _row(["---"] * len(header))]
        for method in self.methods:
            lines.append(_row([METHOD_NAMES[method]] + [self.counts(method, s, t) for _, s, t in self.columns()]))
        notes = self.summary["notes"] + [f"{len(self.summary['errors_this_run'])} errors in the last run (see summary)"]
        notes += list(extra_notes)
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
        return "\n".join(lines) + "\n"

    def beside_paper(self) -> bool:
        """An LLM-judged run on Wiki-NFQA's questions: its figures are set beside the paper's."""
        return not self.proxy and paper.is_wiki_nfqa(set(self.sources))

    def paper_section(self) -> list[str]:
        """The run's MRR and MPR per source dataset beside the paper's Table 3 (what of it is carried over, each
        figure's source named), one row pair per method; nothing for another dataset or a proxy judge."""
        if not self.beside_paper():
            return []
        systems = self.config.get("systems", {})
        mrr, mpr = self.metrics
        header = ["Method", "figures"] + [f"{paper.SOURCE_NAMES[s]} {m}" for s in paper.SOURCES for m in (mrr, mpr)]
        lines = [
            "",
            f"## Beside the paper ({paper.PAPER})",
            "",
            _row(header),
            _row(["---", "---"] + ["---:"] * (len(header) - 2)),
        ]
        for method in ("llm", "rag", "typed"):
            for name in [n for n in self.methods if systems.get(n, {}).get("method", n) == method]:
                cells = [
                    v for s in paper.SOURCES for v in (self.values(name, s, ALL) if s in self.sources else ("–", "–"))
                ]
                lines.append(_row([METHOD_NAMES.get(name, name), "this run"] + cells))
            figures = [paper.paper_figure(method, s) for s in paper.SOURCES]
            cells = [
                v for f in figures for v in ((_paper_value(f.mrr, 3), _paper_value(f.mpr, 1)) if f else ("·", "·"))
            ]
            lines.append(_row([METHOD_NAMES[method], f"paper ({paper.SETTING})"] + cells))
        convention = self.config["rank_convention"]
        missing = 3 * len(paper.SOURCES) * 2 - sum((f.mrr is not None) + (f.mpr is not None) for f in paper.FIGURES)
        lines += [
            "",
            f"- This run: generator {self.config['generator']['engine']}, judge {self.config['judge']['name']}, "
            f"{self.config['questions_selected']} questions, rank convention {convention}"
            + (
                ""
                if convention == paper.CONVENTION
                else f" (the paper's is {paper.CONVENTION}: rerun with --rank-convention "
                f"{paper.CONVENTION}, the verdicts are reused, for figures computed as the paper's)"
            ),
            f"- The paper's figures: {paper.SETTING}; · = not carried over ({missing} of {6 * len(paper.SOURCES)} figures), "
            "never estimated",
        ]
        lines += [
            f"- carried over: {METHOD_NAMES[f.method]} {paper.SOURCE_NAMES[f.source]}"
            f"{f' MRR {f.mrr:.3f}' if f.mrr is not None else ''}{f' MPR {f.mpr:.1f}' if f.mpr is not None else ''}, "
            f"from {f.carried_from}"
            for f in paper.FIGURES
        ]
        return lines

    def _metric_table(self, first: str, columns: list[tuple[str, str, str]]) -> list[str]:
        header = [first] + [f"{label} {m}" for label, _, _ in columns for m in self.metrics]
        lines = [_row(header), _row(["---"] + ["---:"] * (len(header) - 1))]
        for method in self.methods:
            cells = [v for _, s, t in columns for v in self.values(method, s, t)]
            lines.append(_row([METHOD_NAMES[method]] + cells))
        return lines

    def csv_rows(self) -> list[list[str]]:
        header = ["method"]
        for label, _, type_ in self.columns():
            prefix = f"{self.type_header}: {label}" if type_ != ALL else label
            header += [f"{prefix} {m}" for m in self.metrics]
        rows = [header]
        for method in self.methods:
            rows.append(
                [METHOD_NAMES[method]] + [v for _, s, t in self.columns() for v in self.values(method, s, t, True)]
            )
        return rows


def _paper_value(value: float | None, digits: int) -> str:
    return f"{value:.{digits}f}" if value is not None else "·"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def draw_chart(table: _Table, path: Path) -> str | None:
    """Draw the chart; None when drawn, else one line saying why not (and no chart file is left).

    A missing matplotlib or any drawing error must not cost the run its tables, which are written
    first and do not depend on the chart.
    """
    try:
        _chart(table, path)
    except ImportError as error:
        reason = f"matplotlib could not be imported ({error}); reinstall typedrag (pip install typedrag) to get it"
    except Exception as error:  # noqa: BLE001 - any drawing failure; the tables are already written
        reason = f"drawing failed: {type(error).__name__}: {error}"
    else:
        return None
    if path.is_file():
        path.unlink()  # no stale chart from an earlier run, no half-written file
    return " ".join(reason.split())


def _chart(table: _Table, path: Path) -> None:
    """Grouped bars: MPR per predicted type (and all), one bar per method that ran."""
    import matplotlib.pyplot as plt

    figure = chart_figure(table)
    figure.savefig(path, bbox_inches="tight")  # measured at saving: nothing drawn outside the figure is cut off
    plt.close(figure)


def chart_figure(table: _Table):
    """The chart as a matplotlib figure, its title wrapped to the figure's width (a long judge name or a
    narrow chart of one or two types used to run the title off both edges)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = table.types + [ALL]
    methods = [m for m in table.methods if m in table.run_methods]
    width = 0.8 / max(len(methods), 1)
    figure_width = max(6.0, 1.3 * len(groups) + 2)
    figure, axes = plt.subplots(figsize=(figure_width, 4.5), dpi=120, layout="constrained")
    for i, method in enumerate(methods):
        xs, heights, labels = [], [], []
        for g, group in enumerate(groups):
            cell = table.cells.get((method, ALL, group))
            if cell and cell["mpr"] is not None:
                xs.append(g + (i - (len(methods) - 1) / 2) * width)
                heights.append(cell["mpr"])
                labels.append(f"{cell['mpr']:.0f}\nn={cell['scored']}")
        bars = axes.bar(xs, heights, width, label=METHOD_NAMES[method])
        axes.bar_label(bars, labels=labels, fontsize=7, padding=2)
    metric = table.metrics[1]
    axes.set_xticks(range(len(groups)), [g.lower() for g in groups], rotation=20, ha="right")
    axes.set_xlabel("\n".join(textwrap.wrap(table.type_header, int(figure_width * 13))))
    axes.set_ylabel(metric)
    axes.set_ylim(0, 115)
    config = table.config
    title = (
        f"{metric} by question type and method. Judge: {config['judge']['name']}; "
        f"rank convention: {config['rank_convention']}; {config['questions_selected']} questions"
    )
    # About 13 characters of 9-point text per inch, less the margins.
    axes.set_title("\n".join(textwrap.wrap(title, int((figure_width - 0.8) * 12))), fontsize=9)
    axes.legend(fontsize=8, loc="upper right")
    skipped = [METHOD_NAMES[m] for m in table.methods if m not in table.run_methods]
    if skipped:
        figure.supxlabel(f"not run: {', '.join(skipped)} (see notes)", fontsize=7, x=0.01, ha="left")
    return figure

"""English phrasing has one home and a budget (issue 54).

Every pattern and word list that reads how something is phrased in English lives in typedrag/phrasing/. Such rules
grow one corpus's failure at a time; the budget below makes each new one a visible decision: a change that adds a
pattern, an alternative or a listed word raises the budget here in the same commit, and says there what it fixes.

A case-insensitive pattern is the mark of a rule about English words, so none is compiled outside phrasing/ but in
the document readers (they read markup, whose tag and attribute names are case-insensitive), in credential
redaction, and in the few places ALLOWED names with their reason. Both checks read the source with `ast`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "typedrag"

# What typedrag/phrasing/ holds at most. A new rule raises these in the same commit (see the module docstring).
BUDGET = {"patterns": 49, "alternatives": 838, "words": 338}

# Where a case-insensitive pattern may be compiled outside typedrag/phrasing/, and why.
ALLOWED = {
    "corpus/formats": "the document readers: markup's tag, attribute and entity names are case-insensitive",
    "redact.py": "credential redaction: a URL's scheme is case-insensitive",
    "prompts.py": "delimit() defuses our own prompt tags (<partial>, <candidate>, <reference>) inside quoted text, "
    "in whatever case a document or a model writes them: markup, not English",
}

# The `re` functions that take a pattern, and where each takes its flags positionally.
_FLAGS_AT = {
    "compile": 1,
    "search": 2,
    "match": 2,
    "fullmatch": 2,
    "findall": 2,
    "finditer": 2,
    "split": 3,
    "sub": 4,
    "subn": 4,
}
_IGNORECASE = {"I", "IGNORECASE"}
_INLINE_I = re.compile(r"\(\?[aiLmsux]*i[aiLmsux]*[:)]")  # (?i), (?si), (?i:...); not (?-i:...)


@dataclass(frozen=True)
class Call:
    """One call of the `re` module in the source: where, its pattern expression and its flags expression."""

    path: Path
    line: int
    pattern: ast.expr | None
    flags: ast.expr | None


def _re_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the module binds to `re` itself, and to functions imported from it."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "re"}
        elif isinstance(node, ast.ImportFrom) and node.module == "re":
            functions |= {alias.asname or alias.name for alias in node.names if alias.name in _FLAGS_AT}
    return modules, functions


def re_calls(path: Path) -> list[Call]:
    """Every call of a `re` function in the file, with its pattern and flags as written."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules, functions = _re_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        is_re = (
            isinstance(func, ast.Attribute)
            and func.attr in _FLAGS_AT
            and isinstance(func.value, ast.Name)
            and func.value.id in modules
        ) or (isinstance(func, ast.Name) and func.id in functions)
        if not is_re:
            continue
        name = func.attr if isinstance(func, ast.Attribute) else func.id
        flag_position = _FLAGS_AT[name]
        flags = next((k.value for k in node.keywords if k.arg == "flags"), None)
        if flags is None and len(node.args) > flag_position:
            flags = node.args[flag_position]
        found.append(Call(path, node.lineno, node.args[0] if node.args else None, flags))
    return found


def _strings_assigned(tree: ast.Module) -> dict[str, ast.expr]:
    return {
        t.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def case_insensitive(call: Call, assigned: dict[str, ast.expr]) -> bool:
    """Whether the call's flags hold re.I / re.IGNORECASE, or its pattern (or a module string it names) holds (?i)."""
    if call.flags is not None:
        for node in ast.walk(call.flags):
            if (isinstance(node, ast.Attribute) and node.attr in _IGNORECASE) or (
                isinstance(node, ast.Name) and node.id in _IGNORECASE
            ):
                return True
    pending, seen = [call.pattern] if call.pattern is not None else [], set()
    while pending:
        for node in ast.walk(pending.pop()):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
                if _INLINE_I.search(text):
                    return True
            elif isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
                seen.add(node.id)
                pending.append(assigned[node.id])
    return False


def case_insensitive_outside(package: Path = PACKAGE) -> list[str]:
    """file:line of each case-insensitive pattern compiled outside typedrag/phrasing/ and ALLOWED."""
    found = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if where.startswith("phrasing/") or any(where == place or where.startswith(place + "/") for place in ALLOWED):
            continue
        assigned = _strings_assigned(ast.parse(path.read_text(encoding="utf-8")))
        found += [f"typedrag/{where}:{call.line}" for call in re_calls(path) if case_insensitive(call, assigned)]
    return found


def _alternatives(parsed) -> int:
    """Branches beyond the first in every alternation of a parsed pattern (re._parser's tree)."""
    count = 0
    for op, value in parsed:
        name = str(op)
        if name == "BRANCH":
            count += len(value[1]) - 1
            count += sum(_alternatives(branch) for branch in value[1])
        elif name == "SUBPATTERN":
            count += _alternatives(value[-1])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            count += _alternatives(value[2])
        elif name in ("ASSERT", "ASSERT_NOT"):
            count += _alternatives(value[1])
        elif name == "ATOMIC_GROUP":
            count += _alternatives(value)
        elif name == "GROUPREF_EXISTS":
            count += _alternatives(value[1]) + (_alternatives(value[2]) if value[2] is not None else 0)
    return count


def phrasing_counts(folder: Path, namespace_of=None) -> dict[str, int]:
    """patterns: `re` calls (each compiled pattern, and each pattern a function passes to `re`); alternatives: each
    pattern's ways of matching (1, plus one per further branch of every alternation, as `re` parses it); words: the
    strings listed in set, list and tuple displays (a type's Literal[...] aside) and in string literals split into
    words ("a b c".split())."""
    from re import _parser  # type: ignore[attr-defined]

    counts = {"patterns": 0, "alternatives": 0, "words": 0}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        namespace = namespace_of(path) if namespace_of else {}
        for call in re_calls(path):
            counts["patterns"] += 1
            pattern = eval(compile(ast.Expression(call.pattern), str(path), "eval"), dict(namespace))  # noqa: S307
            counts["alternatives"] += 1 + _alternatives(_parser.parse(pattern))
        typing = {
            id(n) for sub in ast.walk(tree) if isinstance(sub, ast.Subscript) for n in ast.walk(sub.slice)
        }  # Literal["a", "b"]
        for node in ast.walk(tree):
            if isinstance(node, (ast.Set, ast.List, ast.Tuple)) and id(node) not in typing:
                counts["words"] += sum(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "split"
                and not node.args
                and isinstance(node.func.value, ast.Constant)
                and isinstance(node.func.value.value, str)
            ):
                counts["words"] += len(node.func.value.value.split())
    return counts


def _module_namespace(path: Path) -> dict:
    """The imported module's names, so a pattern built from module strings (rf"...{_COMPARATIVE}...") is read whole."""
    import importlib

    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return vars(importlib.import_module(name.removesuffix(".__init__")))


def test_phrasing_stays_within_its_budget():
    counts = phrasing_counts(PACKAGE / "phrasing", _module_namespace)
    over = {kind: f"{counts[kind]} > {BUDGET[kind]}" for kind in BUDGET if counts[kind] > BUDGET[kind]}
    assert not over, (
        f"typedrag/phrasing/ grew beyond its budget ({over}; now {counts}). A new English rule raises BUDGET in "
        "tests/test_phrasing_budget.py in the same commit, and the commit says which failure it fixes."
    )


def test_no_case_insensitive_pattern_outside_phrasing():
    found = case_insensitive_outside()
    assert not found, (
        f"case-insensitive patterns outside typedrag/phrasing/: {found}. An English rule belongs in typedrag/phrasing/ "
        "(within its budget); anything else that must ignore case is listed in ALLOWED with its reason."
    )


def test_allowed_places_exist():
    """An allowance for a file that moved or went would let its successor through unchecked."""
    assert [place for place in ALLOWED if not (PACKAGE / place).exists()] == []


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ('import re\nX = re.compile(r"\\bhello\\b", re.I)\n', True),
        ('import re\nX = re.compile(r"(?i)hello")\n', True),
        ('import re\nP = r"(?i:hello)"\nX = re.compile(P)\n', True),
        ('import re as r\ndef f(t):\n    return r.sub("a", "b", t, flags=r.IGNORECASE | r.M)\n', True),
        ('from re import search, IGNORECASE\ndef f(t):\n    return search("hello", t, IGNORECASE)\n', True),
        ('import re\nX = re.compile(r"(?-i:Hello)|[A-Z]+", re.M)\n', False),
    ],
)
def test_the_case_check_sees_each_way_of_asking(tmp_path, source, caught):
    (tmp_path / "rule.py").write_text(source, encoding="utf-8")
    assert bool(case_insensitive_outside(tmp_path)) is caught

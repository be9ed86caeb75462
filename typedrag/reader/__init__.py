"""The reader: how well each sentence of some retrieved passages answers a question, and what it does.

For one question and the sentences an answer may quote, the reader gives each sentence
- `answers`: the chance it states part of an answer the asker wants (label 2 of typedrag's reader labels),
  and `on_topic`: the chance it is at least useful background (label 1 or 2);
- `role`: what it does for an answer (a cause, a step, an argument for or against, a sentence that
  relates compared items, advice, ...).

It reads the question, each sentence, its document's title and the heading it is filed under with the MiniLM
embedder typedrag already runs, and scores them by features that hold across corpora: meaning (cosine to the
question, to the title and to the heading), how a sentence ranks among the others, the question's rare words it
holds, its shape (length, punctuation, a capital, a pronoun, digits), and what the document's reader knows of
where it stands (`Piece`: a list item, an ordered one, a note box; under a heading that is itself a question; its
passage's place among the answer's sources). Two small gradient-boosted tree ensembles turn the
features into the two chances; a logistic regression on the embeddings gives the role. The model ships
in typedrag/reader/model/ (arrays and JSON, no pickle) with its card; `python -m typedrag.reader.train`
rebuilds it from the labels and reports it leave-one-corpus-out.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import textwrap
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path

import numpy as np

from typedrag.embed import Embedder, default_embedder
from typedrag.errors import ModelUnavailable
from typedrag.nfq import NFQType
from typedrag.phrasing.words import PRONOUNS as _PRONOUNS
from typedrag.records import PROSE_LINE, SECTION_SEPARATOR, BlockKind, LineKind, named_row, table_cells
from typedrag.text import split_sentences, terms

MODEL_DIR = Path(__file__).parent / "model"
MODEL_FILE = "reader.npz"
META_FILE = "meta.json"
_SENTENCE_ENDS = (".", "!", "?", '."', ".'", ".)", ".”", "?)", "!)")
FEATURES = (
    "cosine",
    "title cosine",
    "below the best",
    "rank",
    "question words held",
    "question words in title",
    "log words",
    "ends a sentence",
    "symbols",
    "capital",
    "digits",
    "near the others",
    "opens with a pronoun",
    "question words",
    # what the document's reader knows (NaN where a labelled pair does not say: the labels made before it was kept)
    "list item",
    "ordered item",
    "note box",
    "source rank",
    "heading cosine",
    "question words in heading",
    "heading asks",
)
# The question types the role is read with (a cause is what a "why" question's answering sentence mostly
# is); scaled so the regression weighs the type about as much as the vectors.
ROLE_TYPES = tuple(t.value for t in NFQType)
TYPE_SCALE = 3.0


def role_input(q: np.ndarray, s: np.ndarray, asked: NFQType | str | None) -> np.ndarray:
    """What the role regression reads for each sentence: its vector, the question's, their product, and
    the question's type (all zeros when not known)."""
    kind = np.zeros((len(s), len(ROLE_TYPES)), dtype=np.float32)
    if asked is not None and str(asked) in ROLE_TYPES:
        kind[:, ROLE_TYPES.index(str(asked))] = TYPE_SCALE
    return np.hstack([s, np.broadcast_to(q, s.shape), s * q, kind]).astype(np.float32)


class Role(StrEnum):
    """What a sentence does for an answer (the reader labels' roles)."""

    NONE = "none"
    DEFINITION = "definition"
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    STEP = "step"
    RELATES = "relates"  # compares the items a question names with each other
    ITEM = "item"  # describes one compared item in a way that bears on the comparison
    FOR = "for"
    AGAINST = "against"
    ADVICE = "advice"
    FACT = "fact"


@dataclass(frozen=True, slots=True)
class Reading:
    """What the reader makes of one sentence for one question."""

    answers: float  # chance the sentence answers (part of) the question
    on_topic: float  # chance it is at least on topic
    role: Role


@dataclass(frozen=True, slots=True)
class Piece:
    """A sentence an answer may quote, with what its document's reader knows of where it stands."""

    text: str
    title: str = ""
    section: str = ""  # its heading path ("Frequently asked questions › Can I renew a loan?")
    kind: BlockKind | None = None  # the kind of its line (prose, item, admonition); None: not known
    order: int | None = None  # an ordered item's position
    rank: int | None = None  # its passage's number among the answer's sources (1: the search's best); None: not known

    @property
    def heading(self) -> str:
        """The last heading of its path ("" when it has none)."""
        return self.section.rsplit(SECTION_SEPARATOR.strip(), 1)[-1].strip()


@dataclass(frozen=True, slots=True)
class Bars:
    """The reader's calibrated thresholds (set on leave-one-corpus-out scores, see the model card)."""

    answers: float  # at or above this a sentence is quoted as answering
    on_topic: float  # at or above this it is on topic


class ReaderUnavailable(ModelUnavailable):
    """The reader's model files are missing or do not match their checksum."""


def features(
    question: str, pieces: Sequence[Piece], q: np.ndarray, s: np.ndarray, t: np.ndarray, h: np.ndarray
) -> np.ndarray:
    """One row of FEATURES per piece, read against the question and the other pieces: `q` is the question's
    vector, `s`, `t` and `h` the pieces', their titles' and their headings' (unit length; zeros for no heading)."""
    n = len(pieces)
    if n == 0:
        return np.zeros((0, len(FEATURES)), dtype=np.float32)
    sentences = [piece.text for piece in pieces]
    cosine, title_cosine, heading_cosine = s @ q, t @ q, h @ q
    rank = (-cosine).argsort().argsort() / n
    held = [terms(text) for text in sentences]
    counts = Counter(term for found in held for term in found)
    asked = terms(question)
    weight = {term: math.log(1 + n / (1 + counts.get(term, 0))) for term in asked}
    total = sum(weight.values()) or 1.0
    centre = s.mean(axis=0)
    nan = float("nan")
    rows = []
    for i, piece in enumerate(pieces):
        text = piece.text
        title_terms, heading = terms(piece.title), piece.heading
        heading_terms = terms(heading)
        words = text.split()
        known = piece.kind is not None
        rows.append(
            (
                cosine[i],
                title_cosine[i],
                cosine[i] - cosine.max(),
                rank[i],
                sum(w for term, w in weight.items() if term in held[i]) / total,
                sum(w for term, w in weight.items() if term in title_terms) / total,
                math.log1p(len(words)),
                text.rstrip().endswith(_SENTENCE_ENDS),
                sum(not c.isalnum() and not c.isspace() for c in text) / max(len(text), 1),
                text[:1].isupper(),
                sum(c.isdigit() for c in text) / max(len(text), 1),
                float(s[i] @ centre),
                bool(words) and words[0].lower().strip(",") in _PRONOUNS,
                len(asked),
                piece.kind is BlockKind.ITEM if known else nan,
                piece.order is not None if known else nan,
                piece.kind is BlockKind.ADMONITION if known else nan,
                piece.rank if piece.rank is not None else nan,
                heading_cosine[i] if heading else nan,
                sum(w for term, w in weight.items() if term in heading_terms) / total if heading else nan,
                heading.endswith("?") and len(heading.split()) >= 3,
            )
        )
    return np.asarray(rows, dtype=np.float32)


def answering(answers: np.ndarray, on_topic: np.ndarray) -> np.ndarray:
    """The chance a sentence answers, never above the chance it is on topic (the two ensembles are fitted
    apart, so the first can exceed the second)."""
    return np.minimum(answers, on_topic)


class Trees:
    """A gradient-boosted ensemble of binary decision trees, stored as arrays: the chance of a label.

    The arrays are checked as they are loaded (`_check`): a damaged or tampered file that still matches its
    checksum must not give NaN chances, read past an array's end or loop forever on a cycle of nodes."""

    def __init__(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        parts = {name: _array(arrays, f"{prefix}.{name}") for name in _TREE_ARRAYS}
        _check_trees(prefix, parts)
        self.baseline = float(parts["baseline"].reshape(-1)[0])
        self.feature = parts["feature"]  # (trees, nodes): the feature a node splits on
        self.threshold = parts["threshold"]
        self.left, self.right = parts["left"], parts["right"]
        self.value, self.leaf = parts["value"], parts["leaf"]
        self.missing_left = parts["missing_left"]

    def chance(self, x: np.ndarray) -> np.ndarray:
        raw = np.full(len(x), self.baseline)
        rows = np.arange(len(x))
        for tree in range(len(self.feature)):
            node = np.zeros(len(x), dtype=np.int64)
            while not self.leaf[tree, node].all():
                value = x[rows, self.feature[tree, node]]
                go_left = np.where(np.isnan(value), self.missing_left[tree, node], value <= self.threshold[tree, node])
                node = np.where(
                    self.leaf[tree, node], node, np.where(go_left, self.left[tree, node], self.right[tree, node])
                )
            raw += self.value[tree, node]
        return 1 / (1 + np.exp(-raw))


_TREE_ARRAYS = ("baseline", "feature", "threshold", "left", "right", "value", "leaf", "missing_left")


class _Damaged(ValueError):
    """What is wrong with the model's content, in words for the message."""


def _array(arrays: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name not in arrays:
        raise _Damaged(f"it has no array {name!r}")
    return arrays[name]


def _check_trees(prefix: str, parts: dict[str, np.ndarray]) -> None:
    """Every node array of one shape (trees, nodes), of its kind (integers, numbers, booleans), finite where it is
    read; each split reads a known feature, and sends a row to two nodes after its own (the order the trees
    were exported in), so every walk from the root ends at a leaf within `nodes` steps."""
    shape = parts["feature"].shape
    if len(shape) != 2 or 0 in shape:
        raise _Damaged(f"{prefix}.feature has shape {shape}, not (trees, nodes)")
    for name in _TREE_ARRAYS[1:]:
        if parts[name].shape != shape:
            raise _Damaged(f"{prefix}.{name} has shape {parts[name].shape}, not {shape}")
    kinds = {
        "feature": "i",
        "left": "i",
        "right": "i",
        "threshold": "f",
        "value": "f",
        "baseline": "f",
        "leaf": "b",
        "missing_left": "b",
    }
    for name, kind in kinds.items():
        if parts[name].dtype.kind != kind:
            raise _Damaged(f"{prefix}.{name} holds {parts[name].dtype}, not the kind of values it should")
    if parts["baseline"].size != 1 or not np.isfinite(parts["baseline"]).all():
        raise _Damaged(f"{prefix}.baseline is not one finite number")
    leaf, split = parts["leaf"], ~parts["leaf"]
    if not np.isfinite(parts["value"][leaf]).all():
        raise _Damaged(f"{prefix}.value holds a NaN or an infinity at a leaf")
    if not np.isfinite(parts["threshold"][split]).all():
        raise _Damaged(f"{prefix}.threshold holds a NaN or an infinity at a split")
    feature = parts["feature"][split]
    if feature.size and (feature.min() < 0 or feature.max() >= len(FEATURES)):
        raise _Damaged(f"{prefix}.feature names a feature outside the {len(FEATURES)} the reader computes")
    node = np.broadcast_to(np.arange(shape[1]), shape)[split]
    for side in ("left", "right"):
        child = parts[side][split]
        if child.size and ((child <= node).any() or child.max() >= shape[1]):
            raise _Damaged(
                f"{prefix}.{side} sends a node to itself, to an earlier node or past the last one (a cycle or a broken tree)"
            )


def _check_roles(weights: np.ndarray, bias: np.ndarray, roles: int) -> None:
    """The role regression reads `role_input` (three copies of the embedding, and the type) into one score per role."""
    if weights.ndim != 2 or bias.shape != (roles,) or weights.shape[1] != roles:
        raise _Damaged(
            f"the role regression has shapes {weights.shape} and {bias.shape}, not (inputs, {roles}) and ({roles},)"
        )
    inputs = weights.shape[0] - len(ROLE_TYPES)
    if inputs <= 0 or inputs % 3:
        raise _Damaged(f"the role regression reads {weights.shape[0]} inputs, which no embedding size gives")
    if weights.dtype.kind != "f" or not (np.isfinite(weights).all() and np.isfinite(bias).all()):
        raise _Damaged("the role regression holds a NaN or an infinity")


def _meta(path: Path) -> dict:
    """The model's description, checked: its checksum, name, bars (chances, from 0 to 1), roles and features."""
    if not path.is_file():
        raise ReaderUnavailable(f"reader model description missing: {path}; reinstall typedrag")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise _Damaged("it is not a JSON object")
        bars = meta.get("bars")
        if not (isinstance(bars, dict) and set(bars) == {"answers", "on_topic"}):
            raise _Damaged("its bars are not the answers and on_topic chances")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in bars.values()):
            raise _Damaged("a bar is not a chance from 0 to 1")
        if not isinstance(meta.get("sha256"), str) or not isinstance(meta.get("name"), str):
            raise _Damaged("it names no model file checksum or no model name")
        if (
            not isinstance(meta.get("roles"), list)
            or not meta["roles"]
            or not all(r in set(Role) for r in meta["roles"])
        ):
            raise _Damaged("its roles are not the reader's roles")
        if meta.get("features", list(FEATURES)) != list(FEATURES):
            raise _Damaged("it was trained on other features than this typedrag computes")
    except (ValueError, UnicodeDecodeError) as error:  # json.JSONDecodeError and _Damaged are ValueErrors
        raise ReaderUnavailable(f"reader model description {path} is damaged ({error}); reinstall typedrag") from None
    return meta


def _verified(path: Path, sha256: str) -> bytes:
    """The bytes of `path`, read once and checked against `sha256`."""
    if not path.is_file():
        raise ReaderUnavailable(f"reader model file missing: {path}; reinstall typedrag")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise ReaderUnavailable(f"reader model {path} has sha256 {digest}, expected {sha256}; reinstall typedrag")
    return data


class Reader:
    """Reads the sentences an answer may quote against a question. Thread-safe (the embedder caches)."""

    def __init__(self, model_dir: Path = MODEL_DIR, embedder: Embedder | None = None) -> None:
        """Load and check the model; `ReaderUnavailable` names what is missing or damaged."""
        meta = _meta(model_dir / META_FILE)
        path = model_dir / MODEL_FILE
        data = _verified(path, meta["sha256"])
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
                loaded = {name: arrays[name] for name in arrays.files}
            self._answers, self._on_topic = Trees(loaded, "answers"), Trees(loaded, "on_topic")
            self._role_weights, self._role_bias = _array(loaded, "roles.weights"), _array(loaded, "roles.bias")
            _check_roles(self._role_weights, self._role_bias, len(meta["roles"]))
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:  # np.load's errors, and _Damaged
            raise ReaderUnavailable(f"reader model {path} is damaged ({error}); reinstall typedrag") from None
        self.name = meta["name"]
        self.bars = Bars(**meta["bars"])
        self.roles = [Role(role) for role in meta["roles"]]
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def read(
        self, question: str, sentences: Sequence[Piece | tuple[str, str]], asked: NFQType | None = None
    ) -> list[Reading]:
        """A reading of each piece (or (title, sentence), where nothing else is known of it) for `question`, the
        pieces read as one set (how each ranks among the others is part of its reading); `asked`, the question's
        type, informs the role."""
        if not sentences:
            return []
        pieces = [piece if isinstance(piece, Piece) else Piece(piece[1], piece[0]) for piece in sentences]
        texts, titles = [piece.text for piece in pieces], [piece.title for piece in pieces]
        headings = [piece.heading for piece in pieces]
        named = list(dict.fromkeys(heading for heading in headings if heading))
        vectors = self.embedder.embed(
            [question, *texts, *titles, *named], keep_from=1
        )  # a passage's: an index keeps them
        n = len(texts)
        q, s, t = vectors[0], vectors[1 : 1 + n], vectors[1 + n : 1 + 2 * n]
        found = dict(zip(named, vectors[1 + 2 * n :]))
        h = np.stack([found[heading] if heading else np.zeros_like(q) for heading in headings])
        x = features(question, pieces, q, s, t, h)
        on_topic = self._on_topic.chance(x)
        answers = answering(self._answers.chance(x), on_topic)
        roles = (role_input(q, s, asked) @ self._role_weights + self._role_bias).argmax(axis=1)
        return [Reading(float(a), float(o), self.roles[r]) for a, o, r in zip(answers, on_topic, roles)]


_default_lock = threading.Lock()


@lru_cache(maxsize=1)
def _default() -> Reader:
    return Reader()


def default_reader() -> Reader:
    """One shared reader per process."""
    with _default_lock:
        return _default()


QUOTED_KINDS = frozenset({BlockKind.PROSE, BlockKind.ITEM, BlockKind.ADMONITION})
MAX_TERM_WORDS = 12  # a definition list's term this long or shorter names the first piece of its definition
# A one-line code block this short is quoted with the sentence that leads into it ("use command:"), which says
# nothing alone.
MAX_LEAD_CODE_WORDS = 20
# ... and a code block of up to this many lines is quoted whole after it, as a fenced block with its indentation
# ("... through events:" over the five lines of a listener that turns SQLite's foreign keys on).
MAX_LEAD_CODE_LINES = 8
TABLE_LINE = LineKind(BlockKind.TABLE)


def quoted_pieces(
    text: str, kinds: Sequence[LineKind], min_words: int, max_words: int
) -> Iterator[tuple[str, LineKind]]:
    """(text, kind of its line) of each piece of a passage an extractive answer may quote, and so the reader reads:
    prose sentences, list items, the sentences of note boxes, and the rows of a table under its head, named by it
    ("Option: CMAKE_INSTALL_PREFIX; Default value: /usr/local; ..."), of `min_words` to `max_words` words. The first
    piece of a definition is named by its term ("work_mem (integer): Sets the base maximum amount of memory ..."),
    unless it says the term's first word itself; a sentence that leads into a one-line code block ("To deactivate
    a virtual environment, type:") ends with it (`deactivate`). `kinds` are the passage's line kinds (none that fit
    its lines: all prose). Here, below the offline engine, so an index can keep these pieces' vectors."""
    lines = text.split("\n")
    kinds = kinds if len(kinds) == len(lines) else (PROSE_LINE,) * len(lines)
    head: tuple[int | None, list[str]] | None = None  # the number of the table being read, its columns' names
    term: str | None = None  # the definition list's term just read: it names the first piece of its definition
    for at, (line, kind) in enumerate(zip(lines, kinds)):
        named, term = term, None
        if kind.kind is BlockKind.TERM:
            term = " ".join(line.split()) if len(line.split()) <= MAX_TERM_WORDS else None
            continue
        if kind.kind is BlockKind.TABLE_HEAD:
            head = (kind.order, table_cells(line))
            continue
        if kind.kind is BlockKind.TABLE:
            if head is not None and head[0] == kind.order and (row := named_row(head[1], line)) is not None:
                if min_words <= len(row.split()) <= max_words:
                    yield row, TABLE_LINE  # a piece of no ordered list, whatever its table's number
            continue
        head = None
        if kind.kind not in QUOTED_KINDS or not line.strip():
            continue
        if kind.kind is BlockKind.ITEM:  # the document readers write an item as "- " or its number, and its text
            line = without_marker(line, kind.order)
        whole = kind.kind is BlockKind.ITEM and len(line.split()) <= max_words  # an item is one piece
        split = [line] if whole else split_sentences(line)
        for number, piece in enumerate(split):
            words = piece.split()
            if named is not None and named.split()[0].strip(",;:").casefold() not in piece.casefold():
                words = f"{named.rstrip(':')}: {piece}".split()  # "work_mem (integer): Sets the base ..."
            named = None
            fenced, counted = "", len(words)  # a code block after the sentence, and the words of both
            if number == len(split) - 1 and piece.rstrip().endswith(":") and (code := _code_after(lines, kinds, at)):
                if counted + len(code.split()) <= max_words:
                    if "\n" in code:  # "... through events:" and the lines of the listener, fenced
                        fenced, counted = f"\n```\n{code}\n```", counted + len(code.split())
                    else:  # "... use command: `/window splitv 33`", the command one word
                        words = [*words, f"`{code}`"]
                        counted = len(words)
            if min_words <= counted <= max_words:
                yield " ".join(words) + fenced, kind


def _code_after(lines: Sequence[str], kinds: Sequence[LineKind], at: int) -> str | None:
    """The code block right after line `at`, to quote with the sentence that leads into it ("To split the screen,
    use command:"): one short line as it is, or up to MAX_LEAD_CODE_LINES lines with their indentation (the passage
    keeps it) and their line breaks; None when there is none, or when it is longer or runs past the passage's end
    (a block cut in two would be quoted half)."""
    block: list[str] = []
    for line, kind in zip(lines[at + 1 :], kinds[at + 1 :]):
        if kind.kind is not BlockKind.CODE:
            break
        block.append(line.rstrip())
        if len(block) > MAX_LEAD_CODE_LINES:
            return None
    else:
        if len(block) > 1:  # the passage ends inside the block, or right after it: its end is not known
            return None
    if not block:
        return None
    if len(block) == 1:
        code = block[0].split()
        return " ".join(code) if 0 < len(code) <= MAX_LEAD_CODE_WORDS else None
    return textwrap.dedent("\n".join(block))


def without_marker(line: str, order: int | None) -> str:
    """A list item's text without the marker the document readers write before it ("- ", or "3. " for the third)."""
    return line.strip().removeprefix("- ").removeprefix(f"{order}. ")

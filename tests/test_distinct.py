"""Near-duplicate passages (one page built as HTML and as Markdown, again in an "all on one page" file) take
one place among an answer's sources, not several (typedrag.index.base.distinct, applied by the driver)."""

from __future__ import annotations

from typedrag.driver import Driver, Services
from typedrag.engines.base import Trace, Written
from typedrag.errors import PlanFailed
from typedrag.index.base import distinct
from typedrag.records import Passage, ScoredPassage
from typedrag.rerank import EmbeddingReranker
from typedrag.steps import Depths
from typedrag.strategies import ComparisonStrategy, EvidenceStrategy
from typedrag.strategies.evidence import Expansion
from typedrag.testing import ListRetriever

MARKDOWN = (
    "A common use case for `readline` is to consume an input file one line at a time. The easiest way to do so\n"
    "is leveraging the [`fs.ReadStream`][] API as well as a `for await...of` loop:\n"
    "const rl = readline.createInterface({ input: fileStream, crlfDelay: Infinity });"
)
HTML = (
    "A common use case for readline is to consume an input file one line at a time. The easiest way to do so is "
    "leveraging the fs.ReadStream API as well as a for await...of loop:\n"
    "const rl = readline.createInterface({input: fileStream, crlfDelay: Infinity});"
)
OTHERS = [
    "The line event is emitted whenever the input stream receives an end-of-line input, one line of the file at a time.",
    "The readline module provides an interface for reading data from a readable stream one line at a time.",
    "The crlfDelay option treats a carriage return followed by a line feed in the file as a single line break.",
    "Iterating over the interface with for await reads the file one line at a time until the stream ends.",
    "The close event is emitted when the input of the interface reaches the end of the file it reads.",
]


def hit(passage_id: str, text: str, score: float = 1.0) -> ScoredPassage:
    return ScoredPassage(Passage(passage_id, passage_id.split("#")[0], "Readline", text), score)


def test_a_passage_another_ranked_above_it_holds_almost_whole_is_set_aside_and_the_order_kept():
    hits = [
        hit("readline.md#56", MARKDOWN),
        hit("readline.html#58", HTML),
        hit("a#1", OTHERS[0]),
        hit("all.html#4227", HTML),
        hit("b#1", OTHERS[1]),
    ]
    assert [h.passage_id for h in distinct(hits)] == ["readline.md#56", "a#1", "b#1"]
    assert [h.passage_id for h in distinct(hits, 2)] == ["readline.md#56", "a#1"]


def test_a_passage_that_shares_a_sentence_but_says_more_is_kept():
    shared = OTHERS[1] + " " + " ".join(OTHERS[2:])
    assert [h.passage_id for h in distinct([hit("a#1", OTHERS[1]), hit("b#1", shared)])] == ["a#1", "b#1"]
    # the shorter one inside a longer one ranked above it adds nothing
    assert [h.passage_id for h in distinct([hit("b#1", shared), hit("a#1", OTHERS[1])])] == ["b#1"]


def readline_docs() -> ListRetriever:
    """The same passage three times (Markdown, HTML, the all-in-one page) beside five that differ."""
    passages = [
        Passage("readline.md#56", "readline.md", "Readline", MARKDOWN),
        Passage("readline.html#58", "readline.html", "Readline", HTML),
        Passage("all.html#4227", "all.html", "Node.js", HTML + " Node.js on one page."),
    ]
    passages += [Passage(f"other-{i}#0", f"other-{i}", "Readline", text) for i, text in enumerate(OTHERS)]
    return ListRetriever(passages)


def offline_driver() -> Driver:
    from typedrag.engines.offline import OfflineEngine
    from typedrag.reader import default_reader

    return Driver(Services(OfflineEngine(default_reader()), readline_docs(), EmbeddingReranker()), Trace())


class Model:
    """A generative engine that widens the search with a query of its own and writes a fixed cited answer."""

    generative, name = True, "model"

    def __init__(self, expansion: Expansion | None = None) -> None:
        self.expansion, self.asked = expansion, []

    async def plan(self, task, question, trace):
        if self.expansion is None:
            raise PlanFailed("no expansion")
        return self.expansion

    async def write(self, task, trace, on_text=None):
        self.asked.append(task)
        return Written("The readline module reads a file one line at a time [1].")


TWINS = {"readline.md#56", "readline.html#58", "all.html#4227"}
QUESTION = "How do I read a file one line at a time with readline?"


async def test_offline_an_answers_sources_hold_one_copy_of_a_passage():
    drove = await offline_driver().drive(EvidenceStrategy("rag"), QUESTION, Depths(top_k=5))
    ids = [source.passage_id for source in drove.sources]
    assert len(TWINS & set(ids)) == 1 and len(ids) == len(set(ids)) == 3, ids  # the first five, one copy each


async def test_with_a_model_the_places_of_near_duplicates_go_to_distinct_passages():
    model = Model()
    drove = await Driver(Services(model, readline_docs(), EmbeddingReranker()), Trace()).drive(
        EvidenceStrategy("rag"), QUESTION, Depths(top_k=5)
    )
    ids = [source.passage_id for source in drove.sources]
    assert len(TWINS & set(ids)) == 1 and len(ids) == 5, ids
    assert [s.passage_id for s in model.asked[-1].sources] == ids  # what the model was given to read


async def test_a_models_own_queries_do_not_bring_back_a_passage_the_question_found_in_another_copy():
    model = Model(
        Expansion(rewrite="Node.js on one page", passage="Node.js on one page")
    )  # finds the all-in-one copy first
    services = Services(model, readline_docs(), EmbeddingReranker(), expand=True)
    question = "How do I consume an input file one line at a time?"  # finds the Markdown copy first
    drove = await Driver(services, Trace()).drive(EvidenceStrategy("rag"), question, Depths(top_k=5))
    ids = [source.passage_id for source in drove.sources]
    assert len(TWINS & set(ids)) == 1 and len(ids) == 5, ids


def test_passages_pooled_from_several_searches_hold_one_copy():
    from typedrag.strategies.base import union

    first = [hit("readline.md#56", MARKDOWN), hit("a#1", OTHERS[0])]
    second = [hit("a#1", OTHERS[0]), hit("readline.html#58", HTML), hit("b#1", OTHERS[1])]
    assert [h.passage_id for h in union([first, second])] == ["readline.md#56", "a#1", "b#1"]


async def test_a_comparisons_items_searched_apart_do_not_bring_the_same_passage_twice():
    drove = await offline_driver().drive(
        ComparisonStrategy(), "What is the difference between the line event and for await?", Depths(top_k=5)
    )
    ids = [source.passage_id for source in drove.sources]
    assert len({"readline.md#56", "readline.html#58", "all.html#4227"} & set(ids)) <= 1, ids

"""One strategy per question type, each a flow of steps (`Strategy.flow(question, depths)`), and the default routes."""

from typedrag.nfq import NFQType
from typedrag.steps import Depths, Strategy, StrategyOutput
from typedrag.strategies.comparison import ComparisonStrategy
from typedrag.strategies.debate import DebateStrategy
from typedrag.strategies.decomposed import SubQueryStrategy
from typedrag.strategies.evidence import ClosedBookStrategy, EvidenceStrategy
from typedrag.strategies.experience import ExperienceStrategy
from typedrag.strategies.instruction import INSTRUCTION
from typedrag.strategies.reason import REASON


def default_routes() -> dict[str, Strategy]:
    """Typed-RAG's plan for each of the six non-factoid types (a fresh dict: callers may change it)."""
    return {
        NFQType.EVIDENCE_BASED: EvidenceStrategy(),
        NFQType.COMPARISON: ComparisonStrategy(),
        NFQType.EXPERIENCE: ExperienceStrategy(),
        NFQType.REASON: REASON,
        NFQType.INSTRUCTION: INSTRUCTION,
        NFQType.DEBATE: DebateStrategy(),
    }


__all__ = [
    "INSTRUCTION",
    "REASON",
    "ClosedBookStrategy",
    "ComparisonStrategy",
    "DebateStrategy",
    "Depths",
    "EvidenceStrategy",
    "ExperienceStrategy",
    "Strategy",
    "StrategyOutput",
    "SubQueryStrategy",
    "default_routes",
]

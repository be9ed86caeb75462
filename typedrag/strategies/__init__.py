"""One strategy per NFQ type, all behind `Strategy.run(question, ctx)`."""

from typedrag.nfq import NFQType
from typedrag.strategies.base import AspectsFailed, Strategy, StrategyContext, StrategyOutput
from typedrag.strategies.comparison import ComparisonStrategy
from typedrag.strategies.debate import DebateStrategy
from typedrag.strategies.evidence import EvidenceStrategy
from typedrag.strategies.experience import ExperienceStrategy
from typedrag.strategies.instruction import InstructionStrategy
from typedrag.strategies.reason import ReasonStrategy

STRATEGIES: dict[NFQType, Strategy] = {
    NFQType.EVIDENCE_BASED: EvidenceStrategy(),
    NFQType.COMPARISON: ComparisonStrategy(),
    NFQType.EXPERIENCE: ExperienceStrategy(),
    NFQType.REASON: ReasonStrategy(),
    NFQType.INSTRUCTION: InstructionStrategy(),
    NFQType.DEBATE: DebateStrategy(),
}

__all__ = ["STRATEGIES", "AspectsFailed", "Strategy", "StrategyContext", "StrategyOutput"]

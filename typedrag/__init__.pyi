# What type checkers see of `typedrag`: the names __init__.py exports lazily (each is imported on first use,
# so `import typedrag` stays quick, and a type checker cannot follow __getattr__). A stub rather than imports
# under `if TYPE_CHECKING:`, which would tie the package to every module in the import graph the layer
# contracts and the circle check read. tests/test_public_api.py keeps this list equal to _EXPORTS.

from typedrag.classify.base import TypeClassifier as TypeClassifier, TypePrediction as TypePrediction
from typedrag.classify.shipped import (
    ShippedClassifier as ShippedClassifier,
    load_default_classifier as load_default_classifier,
)
from typedrag.conversation import Conversation as Conversation
from typedrag.engines.base import (
    Engine as Engine,
    Grounded as Grounded,
    PlanTask as PlanTask,
    WriteTask as WriteTask,
    Written as Written,
)
from typedrag.engines.llm_engine import LLMEngine as LLMEngine
from typedrag.engines.offline import OfflineEngine as OfflineEngine
from typedrag.errors import LLMError as LLMError, TypedragError as TypedragError, UserError as UserError
from typedrag.evaluation.datasets import EvalQuestion as EvalQuestion, Reference as Reference
from typedrag.evaluation.judges import LLMJudge as LLMJudge, ProxyJudge as ProxyJudge
from typedrag.evaluation.runner import (
    EvalOptions as EvalOptions,
    System as System,
    aevaluate as aevaluate,
    evaluate as evaluate,
)
from typedrag.history import Turn as Turn
from typedrag.index.base import Retriever as Retriever
from typedrag.index.memory import FunctionRetriever as FunctionRetriever, ListRetriever as ListRetriever
from typedrag.index.tantivy import (
    TantivyRetriever as TantivyRetriever,
    build_index as build_index,
    open_retriever as open_retriever,
)
from typedrag.llm.base import ChatModel as ChatModel
from typedrag.llm.openai_chat import OpenAIChatModel as OpenAIChatModel
from typedrag.nfq import NFQType as NFQType
from typedrag.pipeline import Method as Method, Pipeline as Pipeline, PipelineSettings as PipelineSettings
from typedrag.prompts import Prompt as Prompt
from typedrag.reader import Reader as Reader
from typedrag.records import Passage as Passage, ScoredPassage as ScoredPassage
from typedrag.rerank import EmbeddingReranker as EmbeddingReranker, Reranker as Reranker
from typedrag.result import (
    Abstention as Abstention,
    AnswerResult as AnswerResult,
    Aspect as Aspect,
    Citation as Citation,
    Source as Source,
    Trace as Trace,
    TypeDecision as TypeDecision,
    Unsourced as Unsourced,
)
from typedrag.steps import Depths as Depths, Strategy as Strategy, StrategyOutput as StrategyOutput
from typedrag.strategies import default_routes as default_routes

__version__: str

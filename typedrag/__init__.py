"""typedrag: Typed-RAG for non-factoid questions (Lee et al., arXiv 2503.15879)."""

__version__ = "0.1.0"

"""typedrag inside LangChain, LlamaIndex and Haystack, and their parts inside typedrag.

One module per framework, each installed by its extra and imported only when you ask for it:

    pip install 'typedrag[langchain]'    ->  typedrag.integrations.langchain
    pip install 'typedrag[llamaindex]'   ->  typedrag.integrations.llamaindex
    pip install 'typedrag[haystack]'     ->  typedrag.integrations.haystack

Each module has a retriever and a chat model adapter (the framework's parts as typedrag's `Retriever`
and `ChatModel`) and typedrag in the framework's own shape (a Runnable, a query engine, a component).
This package imports no framework itself, so `import typedrag.integrations` stays cheap.
"""

__all__: list[str] = []

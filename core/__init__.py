"""What every other floor uses: settings, errors, the LLM / embedding / Weaviate / tokenizer
clients, the snapshot store, the community job's status, consumer lag, the document publisher
and helper-process supervision. It depends only on ``graph/`` (the pure GraphRAG core) and on
third-party libraries, never on ``streams/``, ``agents/``, ``query/`` or the CLI above it."""

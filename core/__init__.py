"""What every other floor uses: settings, errors, the LLM / embedding / Weaviate / tokenizer
clients, the snapshot store, the community job's status, consumer lag, the document publisher
and helper-process supervision. It depends only on ``graph/`` (the pure GraphRAG core) and on
third-party libraries, never on ``streams/``, ``agents/``, ``query/`` or the CLI above it."""

import os

# Arrow's allocator for every process that uses this package: the C library's instead of
# pyarrow's default (mimalloc). Set here, on the floor every other one imports first, because
# Arrow reads the choice once, when pyarrow is first imported, and its Parquet reader
# allocates from that pool whatever ``pyarrow.set_memory_pool`` says later. mimalloc keeps the
# pages a read frees in per-thread heaps: the query service reading 8,000 articles' graph
# tables peaked 35 MiB higher with it and kept 40 MiB more afterwards, for the same rows
# (``bench/graph_tables.py``). A user's own setting wins.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

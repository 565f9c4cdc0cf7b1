"""Pure GraphRAG logic: no Kafka, Weaviate, HTTP or LLM clients in here."""

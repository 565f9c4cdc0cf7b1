"""kafka-graphrag: GraphRAG as an event-driven, incremental indexer on Kafka."""

__version__ = "0.1.0"

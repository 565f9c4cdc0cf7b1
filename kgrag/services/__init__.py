"""Local Kafka and Weaviate without Docker."""

"""Query service: local, global, basic and trend search over the latest snapshot."""

"""The graph's versioned Delta Lake tables, and the conversion of earlier releases' snapshots."""

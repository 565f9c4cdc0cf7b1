"""The community job's pure steps: its state, a run, summaries and a version's tables."""

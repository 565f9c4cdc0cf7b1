"""Stream agents: thin loops that read a topic, call pure graph/ logic, and write."""

"""Graph versions: the model, its table rows, and the legacy snapshot format."""

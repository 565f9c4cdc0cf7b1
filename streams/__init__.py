"""Stream topology: the faust app, topics, record schemas and codecs."""

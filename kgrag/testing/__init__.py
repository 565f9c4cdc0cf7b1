"""Test and benchmark support shipped with the package (scripted LLM server)."""

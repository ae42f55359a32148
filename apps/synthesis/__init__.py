"""Synthesis: turn capabilities into validated environments (LLM drafts or templates)."""

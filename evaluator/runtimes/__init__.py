"""Runtimes: how a model is started, reached, measured and stopped (process, url, docker)."""

"""Listens, but /health never says 200."""

from zoo_server import answer_all, serve

serve(answer_all, health=lambda: 503)

"""Leaderboard pages served by the Flask app: task list, leaderboards, model pages, and
CSV/JSON downloads (``site``, ``downloads``, ``index``); ``api.app`` registers them. The
package itself imports nothing, so importing one page module never runs the others."""

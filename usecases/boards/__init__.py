"""Leaderboards: assembling a board for a viewer's weights, its measurement warnings, the
task's default view, the prepared-board cache and a model's public results."""

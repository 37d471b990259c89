"""The shared vocabulary of every layer: examples and predictions, score keys and results,
failure codes with their blame, job statuses with transitions and retry policy, axes, the
plugin registry and the clock.

This package imports nothing else of Dynaeval's (a contract in CI checks it), so any
package may speak it without pulling in an engine.
"""

"""Turning predictions into keyed scores and rolling them up per round and task (pure)."""

"""The dynamic loop's use cases: writing an example against a live model, validating the
examples that fooled one, freezing a round into a held-out set."""

"""The HTTP layer (in Dynabench's templates, the part a submitter leaves alone)."""

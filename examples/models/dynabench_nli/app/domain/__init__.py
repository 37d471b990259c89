"""The model itself (in Dynabench's templates, the part a submitter writes)."""

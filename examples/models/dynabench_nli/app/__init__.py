"""A Dynabench (Dynalab 2.0) NLI model, laid out like Dynabench's published templates."""

"""What a model is fed: held-out datasets, cached perturbed sets, and the held-out text kept out of logs."""

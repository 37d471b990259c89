"""Talking to a model over HTTP: the client, protocol dialects, deadlines and opaque wire ids."""

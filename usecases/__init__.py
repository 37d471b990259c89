"""What a user can do, without HTTP: submit, rerun, cancel, compare, add a round, write or
validate an example, freeze, start an adversary run, save a view, assemble a leaderboard.

Each action is a plain function or class with typed inputs and outputs. The API (``api/``)
parses a request, calls one and renders the answer; the CLI (``client/``) calls the same
ones in-process. Nothing here imports Flask; a refused action raises
:class:`usecases.errors.Refused`, which each adapter renders its own way."""

"""The chaos test's own PostgreSQL cluster: it is stopped and started during the test, so it
must not be the session's shared one (other tests keep using that)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail
from tests.postgres import Cluster, running_cluster, server_bin


@pytest.fixture(scope="module")
def chaos_cluster() -> Iterator[Cluster]:
    """A throwaway cluster of this module only (tests/postgres.py), stopped afterwards."""
    if server_bin() is None:
        skip_or_fail("Debian's postgresql package is not installed (scripts/setup.sh installs it)")
    root = Path(tempfile.mkdtemp(prefix="dynaeval-chaos-pg-"))  # short: socket path limit
    with running_cluster(root) as cluster:
        yield cluster

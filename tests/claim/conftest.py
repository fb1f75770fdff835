"""The database servers the claim's suites share: one PostgreSQL and one MariaDB per module that asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import servers


@pytest.fixture(scope="module", params=["postgresql", "mariadb"])
def server(request: pytest.FixtureRequest) -> Iterator[servers.Server]:
    with servers.postgresql() if request.param == "postgresql" else servers.mariadb() as running:
        yield running

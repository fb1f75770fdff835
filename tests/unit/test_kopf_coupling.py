"""Where the operator leans on kopf beyond its documented API, a test fails when kopf changes under it.

One such place is left: kopf's peering announces that this replica pauses (another with a higher
priority is active) or resumes only in its log, and handlers._PeeringLog follows those lines.
"""

from __future__ import annotations

import inspect
import logging
import threading

import kopf._core.engines.peering as peering

from appschedule.shell import handlers


def test_kopf_still_announces_peering_decisions_in_the_words_we_follow() -> None:
    source = inspect.getsource(peering)
    assert f'logger.info(f"{handlers.PAUSING} ' in source
    assert f'logger.info(f"{handlers.RESUMING}.' in source


def test_peering_lines_pause_and_resume_the_workers() -> None:
    class Workers:
        running = threading.Event()

    workers = Workers()
    workers.running.set()
    follower = handlers._PeeringLog(workers)  # type: ignore[arg-type]
    logger = logging.getLogger(peering.__name__)
    assert logger.name.startswith("kopf.")  # it propagates to the "kopf" logger, where startup() attaches the follower
    kopf_logger, level = logging.getLogger("kopf"), logger.level
    kopf_logger.addHandler(follower)
    logger.setLevel(logging.INFO)  # as kopf.configure() leaves it
    try:
        logger.info(f"{handlers.PAUSING} {{'peer-1'}}.")
        assert not workers.running.is_set()
        logger.info(f"{handlers.RESUMING}. Conflicting operators with the same priority are gone.")
        assert workers.running.is_set()
    finally:
        kopf_logger.removeHandler(follower)
        logger.setLevel(level)

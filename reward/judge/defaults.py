"""The served judge's defaults, in one place: :class:`reward.judge.settings.JudgeSettings` and the
backends' constructors (``HTTPJudge``, ``ChatJudge``) both read them, so a request timeout, a
retry count or a deadline has one default everywhere."""

from __future__ import annotations

CONCURRENCY = 64  # judge requests in flight
TIMEOUT_S = 120.0  # one request (--item-timeout)
MAX_RETRIES = 4  # retries of a failed request
DEADLINE_S = 14400.0  # a run's time waiting on the judge, from its first request (--deadline): 4 hours
CIRCUIT_BREAKER = 16  # unanswered requests in a row on every endpoint that stop the run
# During a run each endpoint answers the fixed probe items again (reward.judge.watch): after this many
# requests or seconds, whichever comes first, and after every reconnection. 4 probe requests per 2,000
# graded: 0.2% more work.
PROBE_EVERY_ITEMS = 2000
PROBE_EVERY_S = 300.0
PROBE_IDLE_S = 30.0  # an endpoint quiet this long is probed before it grades again

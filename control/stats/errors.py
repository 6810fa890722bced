"""Typed failures of the statistics package.

They subclass ValueError so plain numeric callers can catch them generically,
and carry an OpenAI-style type/code so the control plane's error handler (and
the automation jobs that store evidence) can render them without a lookup
table. An automation job treats `InsufficientSamplesError` as "hold: missing
evidence", never as a defect.
"""

from specwire.errors import ErrorBody


class StatsError(ValueError):
    """Base of every statistics input error."""

    status_code: int = 422
    error_type: str = "invalid_request_error"
    code: str = "invalid_statistics_input"

    def to_body(self) -> ErrorBody:
        return ErrorBody.of(str(self), self.error_type, self.code)


class InconsistentCountersError(StatsError):
    """Counters that cannot come from one speculative decoder (e.g. more accepted than drafted)."""

    code = "inconsistent_counters"


class InsufficientSamplesError(StatsError):
    """Too little data to compute the statistic at all (an empty arm, zero drafts)."""

    status_code = 409
    error_type = "missing_evidence"
    code = "insufficient_samples"

"""A request record turned into an eval case (`eval-sets add-case --from-request`).

The set's next version is the latest one's cases plus the new case; the record
gives the case its labels (its sampling settings, adapter, segment, tenant,
endpoint, the request id), the operator the prompt reference and digest, since
control never held the request's text.
"""

import re
from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.errors import Conflict, InvalidRequest
from control.evaluations import repository as repo
from control.evaluations.schemas import CaseFromRequest, EvalCaseCreate, EvalSetCreate
from control.evaluations.schemas import EvalCase as EvalCaseOut
from control.evaluations.service import create_set, get_set
from control.models import EvalSet, RequestRecordRow
from control.requests import repository as request_repo

SETTINGS = ("temperature", "top_p", "top_k", "max_tokens", "structured_output")
MAX_LABEL = 200


class StaleEvalSet(Conflict):
    code = "stale_eval_set"


def labels_of(record: RequestRecordRow) -> dict[str, str]:
    """The record's settings and routing as slicing labels (no text)."""
    sampling: dict[str, Any] = record.sampling or {}
    labels = {k: sampling[k] for k in SETTINGS if sampling.get(k) is not None}
    labels |= {
        "adapter": record.adapter,
        "segment": record.segment,
        "tenant": record.tenant,
        "endpoint": record.endpoint,
        "request": record.request_id,
    }
    return {k: str(v)[:MAX_LABEL] for k, v in labels.items() if v is not None}


def add_case_from_request(
    session: Session, set_id: int, body: CaseFromRequest, *, actor: str
) -> EvalSet:
    current = get_set(session, set_id)
    latest = repo.latest_set(session, current.name)
    if latest is not None and latest.id != current.id:
        raise StaleEvalSet(
            f"eval set {current.name} v{current.version} is not the latest (v{latest.version}, "
            f"id {latest.id}); add the case to that one",
            details={"latest_id": latest.id, "latest_version": latest.version},
        )
    rows = request_repo.records_by_request_id(session, body.from_request)
    if not rows:
        raise InvalidRequest(
            f"no record of request {body.from_request!r} (not sampled, not yet flushed, or "
            "past retention)",
            details={"param": "from_request"},
        )
    record = rows[0]
    key = body.case_key or "incident-" + re.sub(r"[^A-Za-z0-9._-]", "-", body.from_request)
    key = key[:200]
    existing = [
        EvalCaseCreate.model_validate(
            EvalCaseOut.model_validate(c).model_dump(include=set(EvalCaseCreate.model_fields))
        )
        for c in current.cases
    ]
    if any(c.case_key == key for c in existing):
        raise Conflict(
            f"eval set {current.name} v{current.version} already has case {key!r}",
            code="case_exists",
            details={"param": "case_key"},
        )
    case = EvalCaseCreate(
        case_key=key,
        labels=labels_of(record),
        why=body.why
        or f"production request {record.request_id}: outcome {record.outcome}, "
        f"HTTP {record.http_status}",
        source=body.source,
        reviewer=body.reviewer,
        supports=body.supports or f"incident: request {record.request_id}",
        refresh_by=body.refresh_by,
        prompt_ref=body.prompt_ref,
        prompt_sha256=body.prompt_sha256,
        blocking=body.blocking,
        boundary=body.boundary,
    )
    new = create_set(
        session,
        EvalSetCreate(
            name=current.name,
            description=current.description,
            prompt_store=current.prompt_store,
            cases=[*existing, case],
        ),
        actor=actor,
    )
    record_audit(
        session,
        actor=actor,
        action="eval_set.add_case",
        entity_type="eval_set",
        entity_id=new.id,
        after={"case_key": key, "from_request": record.request_id, "source": str(body.source)},
    )
    return new

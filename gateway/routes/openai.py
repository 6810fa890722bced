"""The OpenAI-compatible surface: chat completions, completions, models.

The completion routes only name their body schema and path; the request path
itself is `gateway.pipeline`.
"""

from typing import Any, cast

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from gateway import pipeline
from gateway.errors import ModelNotFound
from gateway.proxy.intake import authenticate, request_id_of
from gateway.proxy.schemas import ChatCompletionBody, CompletionBody, SamplingParams
from gateway.state import GatewayState

router = APIRouter()

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": desc}
    for code, desc in {
        400: "Malformed JSON, or an invalid parameter type or value",
        401: "Missing or invalid API key",
        403: "Model or override header not allowed for this key",
        404: "Unknown model",
        408: "Body not received in time (request_body_timeout_s); the connection is closed",
        413: "Body too large (after decompression)",
        415: "Content-Encoding other than gzip, deflate or identity",
        429: "Tenant quota exhausted (Retry-After)",
        502: "Engine failure",
        503: "No healthy engine / no snapshot / gateway overloaded (Retry-After)",
        504: "Engine timeout",
    }.items()
}


def gateway_state(request: Request) -> GatewayState:
    return cast(GatewayState, request.app.state.gateway)


def _body_doc(schema: type[SamplingParams]) -> dict[str, Any]:
    """The body schema for the OpenAPI document; parsing stays manual (typed 400s, size cap)."""
    doc = schema.model_json_schema()
    defs = doc.pop("$defs", {})

    def inline(node: Any) -> Any:
        # "#/$defs/X" would resolve against the OpenAPI document root; our models nest
        # without cycles, so the definitions are simply inlined.
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": inline(doc)}},
        }
    }


@router.post("/v1/chat/completions", responses=_ERRORS, openapi_extra=_body_doc(ChatCompletionBody))
async def chat_completions(request: Request) -> Response:
    return await pipeline.serve(
        gateway_state(request), request, ChatCompletionBody, "/v1/chat/completions"
    )


@router.post("/v1/completions", responses=_ERRORS, openapi_extra=_body_doc(CompletionBody))
async def completions(request: Request) -> Response:
    return await pipeline.serve(gateway_state(request), request, CompletionBody, "/v1/completions")


def _models(request: Request) -> tuple[list[dict[str, Any]], str]:
    """The models this key may use, as OpenAI's model objects, and the request id."""
    state = gateway_state(request)
    request_id = request_id_of(request)
    tenant = authenticate(request, state.store, state.auth_guard)
    snapshot = state.store.snapshot
    assert snapshot is not None
    created = int(snapshot.generated_at.timestamp())
    names = sorted({n for p in snapshot.pools for n in (p.served_model_name, *p.adapters)})
    if tenant.allowed_models is not None:
        names = [n for n in names if n in tenant.allowed_models]
    data = [
        {"id": n, "object": "model", "created": created, "owned_by": "specroute"} for n in names
    ]
    return data, request_id


@router.get("/v1/models", responses={401: _ERRORS[401], 503: _ERRORS[503]})
async def list_models(request: Request) -> JSONResponse:
    data, request_id = _models(request)
    return JSONResponse({"object": "list", "data": data}, headers={"x-request-id": request_id})


# HEAD answers as GET does, without the body (uvicorn sends none): FastAPI routes
# take only the methods they name, and a 405 to HEAD on a GET resource breaks
# clients and health checks that probe with it. Left out of the OpenAPI document.
router.add_api_route("/v1/models", list_models, methods=["HEAD"], include_in_schema=False)


@router.get(
    "/v1/models/{model_id:path}",
    responses={401: _ERRORS[401], 404: _ERRORS[404], 503: _ERRORS[503]},
)
async def retrieve_model(request: Request) -> JSONResponse:
    """One model this key may use (the `openai` client's `models.retrieve`); a model
    that does not exist and one the key may not use are the same 404."""
    # NOTE: read from path_params, not a typed argument: FastAPI would add a 422
    # schema with a $ref to the document, and no value of a path is invalid here.
    model_id = str(request.path_params["model_id"])
    data, request_id = _models(request)
    for model in data:
        if model["id"] == model_id:
            return JSONResponse(model, headers={"x-request-id": request_id})
    raise ModelNotFound(f"The model '{model_id}' does not exist", param="model")


router.add_api_route(
    "/v1/models/{model_id:path}", retrieve_model, methods=["HEAD"], include_in_schema=False
)

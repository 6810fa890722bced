"""The internal API (/internal/v1) that gateways and engine agents call."""

from fastapi import APIRouter

router = APIRouter()

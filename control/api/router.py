"""Every admin domain's router, gathered under one APIRouter mounted at /admin/v1."""

from fastapi import APIRouter

admin_router = APIRouter()

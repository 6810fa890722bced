"""HTTP routes: the OpenAI surface and the operational endpoints."""

"""Request bodies of the OpenAI endpoints, validated but forwarded unchanged.

The models allow extra fields: any OpenAI or vLLM parameter the gateway does
not know is passed through as sent. Only what the gateway reads (or what would
make the engine fail with a 500) is typed and range-checked here.
"""

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

NonNegFloat = Annotated[float, Field(ge=0.0)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: StrictBool | None = None
    continuous_usage_stats: StrictBool | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: StrictStr = Field(min_length=1)
    content: StrictStr | list[dict[str, Any]] | None = None


class SamplingParams(BaseModel):
    """Parameters shared by both endpoints."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr = Field(min_length=1, max_length=256)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: StrictInt | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    n: StrictInt | None = Field(default=None, ge=1, le=128)
    seed: StrictInt | None = None
    stop: StrictStr | list[StrictStr] | None = None
    logit_bias: dict[str, float] | None = None
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0, le=2.0)
    user: StrictStr | None = Field(default=None, max_length=512)
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None


class ChatCompletionBody(SamplingParams):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)


TokenIds = list[StrictInt]


class CompletionBody(SamplingParams):
    prompt: StrictStr | list[StrictStr] | TokenIds | list[TokenIds]
    echo: StrictBool | None = None
    logprobs: StrictInt | None = Field(default=None, ge=0, le=20)

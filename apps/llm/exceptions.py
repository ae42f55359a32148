"""What the LLM client raises. Each is an ApplicationError, so a job that lets one escape
fails with its message, and the API maps it to one error shape."""

from apps.core.exceptions import ApplicationError


class LLMError(ApplicationError):
    """A request to a model endpoint did not give a usable answer.

    ``detail`` is the bare cause ("HTTP 401: Invalid API key"), ``message`` the sentence a
    person reads ("Endpoint “gpt” refused the request: HTTP 401: Invalid API key").
    """

    def __init__(
        self,
        message: str,
        *,
        detail: str = "",
        endpoint: str = "",
        status: int | None = None,
        attempts: int = 0,
        call_id: int | None = None,
    ):
        super().__init__(
            message,
            {"endpoint": endpoint, "status": status, "attempts": attempts, "call_id": call_id},
        )
        self.detail = detail or message
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts
        self.call_id = call_id


class LLMConfigurationError(LLMError):
    """The request could not be made: e.g. the key's environment variable is not set."""


class LLMRequestError(LLMError):
    """The endpoint refused the request with a 4xx other than 429; retrying will not help."""


class LLMUnavailable(LLMError):
    """Transient failures (connection, timeout, 429, 5xx, no free slot) outlasted the retries."""


class LLMOutputError(LLMError):
    """The endpoint answered, but not with what was asked for (e.g. no or truncated JSON)."""

    def __init__(
        self, message: str, *, excerpt: str = "", truncated: bool = False, result=None, **kwargs
    ):
        super().__init__(message, **kwargs)
        self.excerpt = excerpt
        self.truncated = truncated
        self.result = result
        self.extra["excerpt"] = excerpt
        self.extra["truncated"] = truncated

class ApplicationError(Exception):
    """A domain rule was broken: the message is safe to show to the person who acted.

    ``extra`` carries structured details (for example the problems of a spec, each with its
    JSON pointer) and is returned as ``details`` by the API.
    """

    def __init__(self, message: str, extra: dict | None = None):
        super().__init__(message)
        self.message = message
        self.extra = extra or {}

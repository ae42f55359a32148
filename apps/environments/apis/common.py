"""Small helpers shared by the environments API views."""

from drf_spectacular.utils import OpenApiResponse
from rest_framework.views import APIView

from apps.core.api import JSONParser
from apps.environments.apis.serializers import ErrorOutput, SpecProblemsErrorOutput


class JsonApiView(APIView):
    """Bodies are JSON: specs, checks and records are nested JSON, never form fields."""

    parser_classes = [JSONParser]


def validated(serializer_class, data) -> dict:
    """The validated data of ``serializer_class``, or a 400 listing the bad fields."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


# Error responses, for the schema. A member whose role is too low gets 403; another project's
# objects (and missing ones) are 404.
E400 = OpenApiResponse(ErrorOutput, description="Bad input, or a rule of the domain refused it.")
E400_SPEC = OpenApiResponse(
    SpecProblemsErrorOutput,
    description="The spec (or the change) is not schema-valid: ``details.problems`` lists every "
    "problem with its JSON pointer. Nothing was saved.",
)
E403 = OpenApiResponse(ErrorOutput, description="Your role in the project is too low.")
E404 = OpenApiResponse(ErrorOutput, description="No such object in your projects.")
READ_ERRORS = {404: E404}
WRITE_ERRORS = {400: E400, 403: E403, 404: E404}
SPEC_WRITE_ERRORS = {400: E400_SPEC, 403: E403, 404: E404}

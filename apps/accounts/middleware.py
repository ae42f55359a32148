"""Remember the project a person last opened, for pages outside any project."""

from django.conf import settings

from apps.accounts.context_processors import LAST_PROJECT_COOKIE


class LastProjectMiddleware:
    """After a page whose URL names a project (``/p/<slug>/…``) answers 200, keep its slug in
    a cookie; the ``projects`` context processor shows that project's sidebar on account
    pages, and only if the user is a member. A cookie, not the session: no database write."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        slug = match.kwargs.get("slug") if match else None
        user = getattr(request, "user", None)
        if (
            slug
            and response.status_code == 200
            and user is not None
            and user.is_authenticated
            and request.COOKIES.get(LAST_PROJECT_COOKIE) != slug
        ):
            response.set_cookie(
                LAST_PROJECT_COOKIE,
                slug,
                max_age=60 * 60 * 24 * 365,
                samesite="Lax",
                httponly=True,
                secure=settings.SESSION_COOKIE_SECURE,
            )
        return response

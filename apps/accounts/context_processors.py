from django.utils.functional import SimpleLazyObject

LAST_PROJECT_COOKIE = "cw_last_project"


def projects(request):
    """The project switcher's entries, loaded lazily: pages that never show it pay nothing.

    ``nav_project`` is the project last opened (kept by ``LastProjectMiddleware``): pages
    outside any project — API tokens, password — keep its switcher and sidebar, so a person
    never loses their place. It is only ever one of the user's own projects.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_project": None}

    def load():
        from apps.accounts.selectors import project_list_for_user

        return list(project_list_for_user(user=user))

    mine = SimpleLazyObject(load)

    def last():
        wanted = request.COOKIES.get(LAST_PROJECT_COOKIE)
        return next((p for p in mine if p.slug == wanted), None) if wanted else None

    return {"my_projects": mine, "nav_project": SimpleLazyObject(last)}

def projects(request):
    """The project switcher's entries, loaded lazily: pages that never show it pay nothing."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def load():
        from apps.accounts.selectors import project_list_for_user

        return list(project_list_for_user(user=user))

    from django.utils.functional import SimpleLazyObject

    return {"my_projects": SimpleLazyObject(load)}

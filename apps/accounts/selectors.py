from django.db.models import Count

from apps.accounts.models import ApiToken, Membership, Project


def project_list_for_user(*, user):
    return (
        Project.objects.filter(memberships__user=user)
        .annotate(member_count=Count("memberships", distinct=True))
        .order_by("name", "id")
    )


def membership_list(*, project: Project):
    return (
        Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    )


def api_token_list(*, user):
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")

import math

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.access import (
    check_project_role,
    membership_get_for_user,
    project_get_for_user,
)
from apps.accounts.forms import (
    ApiTokenForm,
    MemberAddForm,
    MemberRoleForm,
    ProjectForm,
    ProjectSettingsForm,
)
from apps.accounts.models import ApiToken, Role
from apps.accounts.selectors import (
    api_token_list,
    membership_list,
    project_list_for_user,
)
from apps.accounts.services import (
    api_token_create,
    api_token_revoke,
    membership_add,
    membership_change_role,
    membership_remove,
    project_update,
)
from apps.core.exceptions import ApplicationError
from apps.core.http import redirect_after_post, render_page

CURRENT_PROJECT_SESSION_KEY = "current_project"


@login_required
@require_GET
def home(request):
    projects = list(project_list_for_user(user=request.user))
    if not projects:
        return redirect("accounts:project_list")
    remembered = request.session.get(CURRENT_PROJECT_SESSION_KEY)
    project = next((p for p in projects if p.slug == remembered), projects[0])
    return redirect("workspace:dashboard", slug=project.slug)


@login_required
@require_GET
def project_list(request):
    projects = project_list_for_user(user=request.user)
    return render_page(
        request, "accounts/project_list.html", {"projects": projects, "form": ProjectForm()}
    )


@login_required
@require_http_methods(["GET", "POST"])
def project_settings(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.ADMIN)
    form = ProjectSettingsForm(request.POST or None, instance=project)
    if request.method == "POST" and form.is_valid():
        project_update(
            project=project,
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
        )
        url = reverse("accounts:project_settings", args=[project.slug])
        return redirect_after_post(request, url, "Saved the project settings.")
    return render_page(
        request,
        "accounts/project_settings.html",
        {"project": project, "membership": check_project_role(request.user, project), "form": form},
        partial="form",
    )


def _members_context(request, project, add_form=None):
    return {
        "project": project,
        "membership": check_project_role(request.user, project),
        "members": membership_list(project=project),
        "roles": Role.choices,
        "add_form": add_form or MemberAddForm(),
    }


@login_required
@require_GET
def member_list(request, slug):
    project = project_get_for_user(request.user, slug)
    return render_page(
        request, "accounts/member_list.html", _members_context(request, project), partial="members"
    )


@login_required
@require_POST
def member_add(request, slug):
    project = project_get_for_user(request.user, slug, min_role=Role.ADMIN)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            membership = membership_add(
                project=project,
                username=form.cleaned_data["username"],
                role=form.cleaned_data["role"],
            )
        except ApplicationError as exc:
            form.add_error("username", exc.message)
        else:
            messages.success(request, f"Added {membership.user.username} as {membership.role}.")
            form = None
    return render_page(
        request,
        "accounts/member_list.html",
        _members_context(request, project, add_form=form),
        partial="members",
    )


@login_required
@require_POST
def member_change_role(request, slug, pk):
    project = project_get_for_user(request.user, slug, min_role=Role.ADMIN)
    membership = membership_get_for_user(request.user, pk, min_role=Role.ADMIN)
    if membership.project_id != project.pk:
        raise Http404("No such membership.")
    form = MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one of the listed roles.")
    else:
        try:
            membership_change_role(membership=membership, role=form.cleaned_data["role"])
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request, f"{membership.user.username} is now {form.cleaned_data['role']}."
            )
    if not request.htmx:
        return redirect("accounts:member_list", slug=project.slug)
    return render_page(
        request, "accounts/member_list.html", _members_context(request, project), partial="members"
    )


@login_required
@require_POST
def member_remove(request, slug, pk):
    project = project_get_for_user(request.user, slug, min_role=Role.ADMIN)
    membership = membership_get_for_user(request.user, pk, min_role=Role.ADMIN)
    if membership.project_id != project.pk:
        raise Http404("No such membership.")
    try:
        membership_remove(membership=membership)
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Removed {membership.user.username} from {project.name}.")
    if not request.htmx:
        return redirect("accounts:member_list", slug=project.slug)
    return render_page(
        request, "accounts/member_list.html", _members_context(request, project), partial="members"
    )


@login_required
@require_GET
def token_list(request):
    return render_page(
        request,
        "accounts/token_list.html",
        {"tokens": api_token_list(user=request.user), "form": ApiTokenForm()},
        partial="tokens",
    )


@login_required
@require_http_methods(["GET", "POST"])
def token_create(request):
    """Create a token (POST); a GET — a bookmarked or reloaded form address — goes to the
    token page, where the form is."""
    if request.method == "GET":
        return redirect("accounts:token_list")
    form = ApiTokenForm(request.POST)
    new_secret = None
    if form.is_valid():
        try:
            _token, new_secret = api_token_create(user=request.user, name=form.cleaned_data["name"])
        except ApplicationError as exc:
            form.add_error("name", exc.message)
        else:
            form = ApiTokenForm()
    context = {"tokens": api_token_list(user=request.user), "form": form, "new_secret": new_secret}
    # The secret is rendered into this one response only; it is never stored in clear.
    response = render_page(request, "accounts/token_list.html", context, partial="tokens")
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke(request, pk):
    token = ApiToken.objects.filter(pk=pk, user=request.user).first()
    if token is None:
        raise Http404("No such token.")
    api_token_revoke(token=token)
    messages.success(request, f"Revoked “{token.name}”. Programs using it now get 401.")
    if not request.htmx:
        return redirect("accounts:token_list")
    return render_page(
        request,
        "accounts/token_list.html",
        {"tokens": api_token_list(user=request.user), "form": ApiTokenForm()},
        partial="tokens",
    )


def locked_out(request, original_response=None, credentials=None):
    """The page django-axes shows instead of signing in once a username and address have
    too many failures (``AXES_LOCKOUT_CALLABLE``); HTTP 429, the form is not processed."""
    from axes.helpers import get_cool_off, get_failure_limit

    cool_off = get_cool_off(request)
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        "username": username[:150],
        "failure_limit": get_failure_limit(request, credentials),
        "cooloff_minutes": math.ceil(cool_off.total_seconds() / 60) if cool_off else None,
    }
    return render(request, "accounts/locked_out.html", context, status=429)

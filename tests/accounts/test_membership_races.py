"""Two admins demoting each other at once, on PostgreSQL: one wins, the other is told the
project needs an admin, and no request fails with a database error (it deadlocked before)."""

import contextlib
import threading

import pytest
from django.db import connection

from apps.accounts import services
from apps.accounts.models import Membership, Role
from apps.core.exceptions import ApplicationError
from tests.factories import MembershipFactory, ProjectFactory


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_never_deadlock(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("needs a database with concurrent writers (DATABASE_URL=postgres://…)")
    project = ProjectFactory()
    first, second = (MembershipFactory(project=project, role=Role.ADMIN) for _ in range(2))
    # Hold each change just before it counts the other admins, where the old code held one
    # membership row and then waited for the other's: both arrive there unless one waits.
    both_there = threading.Barrier(2, timeout=2)
    ensure = services._ensure_another_admin

    def meet_then_ensure(membership):
        # A broken barrier: the other change waits for this one's lock, the order that must hold.
        with contextlib.suppress(threading.BrokenBarrierError):
            both_there.wait()
        return ensure(membership)

    monkeypatch.setattr(services, "_ensure_another_admin", meet_then_ensure)
    refused, errors = [], []

    def demote(membership):
        try:
            services.membership_change_role(membership=membership, role=Role.VIEWER)
        except ApplicationError as error:
            refused.append(error.message)
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=demote, args=(m,)) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert refused == ["A project needs at least one admin; make someone else admin first."]
    assert Membership.objects.filter(project=project, role=Role.ADMIN).count() == 1

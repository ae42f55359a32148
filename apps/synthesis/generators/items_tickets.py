"""Support tickets as items: triage, assign, reply, close."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from . import words
from .items import Call, Check, Item
from .world import (
    Person,
    TaskBuilder,
    call,
    count,
    iso,
    lit,
    rx,
    state,
)


class TicketItem(Item):
    value_noun = "assignee"
    write_tool = "update_ticket"
    source_name = "the account owner in the CRM"

    def __init__(self, t: TaskBuilder):
        super().__init__(t)
        self.customer_name = self.w.token(words.PARTNERS)
        self.subject = self.rng.choice(words.TICKET_SUBJECTS)
        self.tier = self.rng.choice(("standard", "gold", "platinum"))
        self.customer = t.add(
            "crm",
            "customers",
            {"name": self.customer_name, "tier": self.tier, "status": "active", "owner": ""},
        )
        self.ticket = t.add(
            "tickets",
            "tickets",
            {
                "customer_id": self.customer["id"],
                "subject": self.subject,
                "status": "open",
                "priority": "high",
                "assignee": None,
                "body": f"{self.subject}: this blocks our team at {self.customer_name}. "
                "Please help.",
            },
        )
        self.tid = self.ticket["id"]
        self.label = f"ticket {self.tid}"
        self.keyword = self.tid

    def policy_scope(self) -> str:
        return f"Reassigning tickets of {self.tier} customers"

    def candidates(self, n: int) -> list[Person]:
        return [self.w.person("Support") for _ in range(n)]

    def text(self, v: Person) -> str:
        return v.name

    def regex(self, v: Person) -> str:
        return f"(?i){rx(v.name)}|{rx(v.email)}"

    def source(self, v: Person | None, *, decoy: bool = False) -> None:
        if not decoy:
            self.customer["owner"] = v.email if v is not None else "unassigned"
            return
        assert v is not None
        self.t.add(
            "tickets",
            "comments",
            {
                "ticket_id": self.tid,
                "body": f"Internal note from last year: {v.name} used to look after "
                f"{self.customer_name}; the account has moved since.",
                "public": False,
                "author": "system",
                "date": iso(self.w.start - timedelta(days=200)),
            },
        )

    def source_reads(self) -> list[Call]:
        return [
            call("get_ticket", ticket_id=self.tid),
            call("get_customer", customer_id=self.customer["id"]),
        ]

    def drift(self, v2: Person, when: datetime) -> dict[str, Any]:
        return {
            "op": "update",
            "service": "crm",
            "collection": "customers",
            "id": self.customer["id"],
            "values": {"owner": v2.email},
            "silent": True,
        }

    def request(self) -> str:
        return (
            f"Ticket {self.tid} from {self.customer_name} ({self.subject}) needs an owner. "
            "Assign it to the customer's account owner as listed in the CRM."
        )

    def request_with(self, v: Person) -> str:
        return f"Assign ticket {self.tid} ({self.customer_name}: {self.subject}) to {v.name}."

    def request_without(self) -> str:
        return (
            f"Assign ticket {self.tid} ({self.customer_name}: {self.subject}) to the colleague "
            "who is taking it over."
        )

    def question(self) -> str:
        return f"Who should take ticket {self.tid}?"

    def answer(self, v: Person) -> str:
        return f"Give it to {v.name} ({v.email})."

    def done(self, v: Person) -> str:
        return f"assigned ticket {self.tid} to {v.name}"

    def write(self, v: Person) -> list[Call]:
        return [call("update_ticket", ticket_id=self.tid, assignee=v.email)]

    def write_checks(self, v: Person) -> list[tuple[str, Check]]:
        query = f"tickets.tickets[?id == {lit(self.tid)}] | [0].assignee"
        return [(f"{self.tid} is assigned to {v.name}.", state(query, "==", v.email))]

    def absent(self) -> Check:
        return state(f"tickets.tickets[?id == {lit(self.tid)}] | [0].assignee", "absent")

    def fix(self, v2: Person) -> list[Call]:
        return self.write(v2)

    def robust_arguments(self) -> dict[str, Any]:
        return {"ticket_id": self.tid}

    def blocker(self, v1: Person, v2: Person) -> str:
        for _ in range(3):
            subject = self.rng.choice(words.TICKET_SUBJECTS)
            self.t.add(
                "tickets",
                "tickets",
                {
                    "customer_id": self.customer["id"],
                    "subject": subject,
                    "status": "open",
                    "priority": "urgent",
                    "assignee": v1.email,
                    "body": f"{subject} (urgent).",
                },
            )
        self.busy_email = v1.email
        return f"{v1.name} already holds three urgent open tickets"

    def availability_reads(self) -> list[Call]:
        return [call("list_tickets", status="open")]

    def blocker_intact(self) -> Check:
        query = (
            f"tickets.tickets[?assignee == {lit(self.busy_email)} && priority == 'urgent' "
            "&& status == 'open']"
        )
        return count(query, 3)

    def request_conflict(self, v1: Person, v2: Person) -> str:
        return (
            # Both addresses in the message: nothing the agent reads is sure to list the
            # fallback colleague (support-desk has no directory; filler tickets name assignees
            # by chance), and the write needs their address.
            f"Assign ticket {self.tid} ({self.customer_name}: {self.subject}) to {v1.name} "
            f"({v1.email}), or to {v2.name} ({v2.email}) if {v1.first} already holds three "
            "urgent open tickets."
        )

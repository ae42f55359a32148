"""Scenario families: which services a workplace has, what its work items are, and the
realistic filler records around them.

Filler is generated after the tasks, so it can stay clear of every slot, name and code
the tasks rely on (no accidental clash, no second record matching a task's search).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import words
from .items import Item
from .items_calendar import MeetingItem, OnboardingItem
from .items_rows import InvoiceItem, PurchaseItem
from .items_tickets import TicketItem
from .world import TaskBuilder, World, iso


@dataclass(frozen=True)
class Family:
    key: str
    title: str
    services: tuple[str, ...]
    description: str
    domain: str
    role: str  # "the operations assistant" ...
    items: tuple[type[Item], ...] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "services": list(self.services),
            "description": self.description,
        }

    def new_item(self, t: TaskBuilder) -> Item:
        return t.rng.choice(self.items)(t)


FAMILIES: dict[str, Family] = {
    f.key: f
    for f in (
        Family(
            "meeting-coordination",
            "Meeting coordination",
            ("email", "calendar", "contacts"),
            "An assistant's inbox, calendar and address book: meeting requests by email, "
            "busy slots, look-alike contacts.",
            "operations",
            "the operations assistant",
            (MeetingItem,),
        ),
        Family(
            "support-desk",
            "Support desk",
            ("tickets", "crm", "kb", "email"),
            "A helpdesk with customer accounts, a knowledge base and email: routing tickets to "
            "account owners under rota and escalation rules.",
            "customer support",
            "the support coordinator",
            (TicketItem,),
        ),
        Family(
            "finance-close",
            "Finance close",
            ("spreadsheet", "files", "email"),
            "Month-end bookkeeping: invoice files, the Invoices and Budget sheets, cost centers.",
            "finance",
            "the finance assistant",
            (InvoiceItem,),
        ),
        Family(
            "onboarding",
            "People onboarding",
            ("contacts", "calendar", "files", "email"),
            "New starters: HR onboarding files (with confidential data), orientation sessions "
            "in the calendar, the company directory.",
            "people operations",
            "the people-operations assistant",
            (OnboardingItem, MeetingItem),
        ),
        Family(
            "procurement",
            "Procurement and approvals",
            ("crm", "spreadsheet", "email", "kb"),
            "Purchase orders against preferred-vendor articles, vendor accounts in the CRM and "
            "the Purchase orders sheet, under approval thresholds.",
            "procurement",
            "the procurement assistant",
            (PurchaseItem,),
        ),
    )
}


def families_for(services: list[str] | tuple[str, ...] | None) -> list[Family]:
    """Families that fit ``services`` best: all families whose services include every
    requested one; failing that, those sharing the most services with the request."""
    if not services:
        return list(FAMILIES.values())
    wanted = list(dict.fromkeys(services))
    covering = [f for f in FAMILIES.values() if all(s in f.services for s in wanted)]
    if covering:
        return covering
    best = max(sum(s in f.services for s in wanted) for f in FAMILIES.values())
    return [f for f in FAMILIES.values() if sum(s in f.services for s in wanted) == best]


# --------------------------------------------------------------------------- filler


def _n(w: World, scale: float = 1.0) -> int:
    lo, hi = w.settings["filler"]
    return max(1, int(w.rng.randint(lo, hi) * scale))


def fill(w: World, family: Family) -> None:
    """Add realistic filler records to every service of the world."""
    # A handful of extra colleagues so the directory and inbox are not only the task cast.
    cast = len(w.people)
    for _ in range(_n(w, 0.5)):
        w.person()
    w.bystanders = w.people[cast:]  # filler-only colleagues: safe recipients of old mail
    if w.has("crm"):
        _crm(w)
    for service in list(w.services):
        filler = _FILLERS.get(service)
        if filler is not None:
            filler(w)


def _email(w: World) -> None:
    people = list(w.people)
    for _ in range(_n(w)):
        sender = w.rng.choice(people) if w.chance(0.75) else w.outsider()
        when = w.start - timedelta(hours=w.rng.randint(1, 24 * 14))
        w.add(
            "email",
            "inbox",
            {
                "from": sender.email,
                "to": w.me,
                "subject": w.rng.choice(words.EMAIL_SUBJECTS),
                "date": iso(when),
                "body": f"Hi, {w.rng.choice(words.EMAIL_BODIES)} {sender.first}",
            },
        )
    for _ in range(w.rng.randint(0, 4)):
        to = w.rng.choice(w.bystanders)
        w.add(
            "email",
            "sent",
            {
                "from": w.me,
                "to": to.email,
                "subject": w.rng.choice(words.EMAIL_SUBJECTS),
                "date": iso(w.start - timedelta(hours=w.rng.randint(20, 24 * 10))),
                "body": w.rng.choice(words.EMAIL_BODIES),
            },
        )
    for _ in range(w.rng.randint(0, 3)):
        w.add(
            "email",
            "drafts",
            {
                "to": w.rng.choice(w.bystanders).email,
                "subject": w.rng.choice(words.EMAIL_SUBJECTS),
                "body": "(draft) " + w.rng.choice(words.EMAIL_BODIES),
            },
        )


def _calendar(w: World) -> None:
    people = list(w.people)
    added = 0
    for _ in range(_n(w) * 4):
        if added >= _n(w):
            break
        day = w.workday(w.rng.randint(0, 9))
        start = day.replace(hour=w.rng.randint(8, 16), minute=w.rng.choice((0, 30)))
        end = start + timedelta(minutes=w.rng.choice((15, 30, 60)))
        if not w.free(start, end):
            continue
        w.reserve(start, end)
        guests = [w.me] + [p.email for p in w.rng.sample(people, min(len(people), 2))]
        w.add(
            "calendar",
            "events",
            {
                "title": w.rng.choice(words.FILLER_EVENT_TITLES),
                "start": iso(start),
                "end": iso(end),
                "attendees": guests,
            },
        )
        added += 1


def _contacts(w: World) -> None:
    for p in w.people:
        w.add(
            "contacts",
            "people",
            {"name": p.name, "email": p.email, "company": f"{w.company} ({p.department})"},
        )
    for _ in range(_n(w, 0.5)):
        o = w.outsider()
        w.add("contacts", "people", {"name": o.name, "email": o.email, "company": o.company})


def _files(w: World) -> None:
    topics = list(words.FILE_TOPICS)
    w.rng.shuffle(topics)
    for folder, name in topics[: _n(w, 0.6)]:
        w.add(
            "files",
            "files",
            {
                "path": f"{folder}/{name}.md",
                "content": f"# {name.replace('-', ' ').title()}\n"
                + w.rng.choice(words.EMAIL_BODIES),
            },
        )
    for _ in range(_n(w, 0.4)):
        code = w.code("INV")
        vendor = w.rng.choice(words.PARTNERS)
        w.add(
            "files",
            "files",
            {
                "path": f"invoices/archive/{code.lower()}.txt",
                "content": f"Invoice {code}\nVendor: {vendor}\n"
                f"Amount: {w.rng.randrange(100, 9000, 10)} EUR\nStatus: paid",
            },
        )


def _kb(w: World) -> None:
    topics = list(words.KB_TOPICS)
    w.rng.shuffle(topics)
    for title, content in topics[: _n(w, 0.5)]:
        w.add("kb", "articles", {"title": title, "content": content, "tags": ["how-to"]})


def _spreadsheet(w: World) -> None:
    for _ in range(_n(w)):
        code = w.code("INV")
        w.add(
            "spreadsheet",
            "rows",
            {
                "sheet": "Invoices",
                "invoice": code,
                "vendor": w.rng.choice(words.PARTNERS),
                "amount": w.rng.randrange(100, 20_000, 10),
                "cost_center": w.rng.choice(words.COST_CENTERS)[0],
                "status": w.rng.choice(("paid", "paid", "unpaid")),
            },
        )
    for _ in range(_n(w, 0.5)):
        w.add(
            "spreadsheet",
            "rows",
            {
                "sheet": "Purchase orders",
                "po": w.code("PO"),
                "item": f"{w.rng.randint(1, 20)} {w.rng.choice(words.VENDOR_CATEGORIES)}",
                "vendor": w.rng.choice(words.PARTNERS),
                "amount": w.rng.randrange(200, 30_000, 10),
                "status": w.rng.choice(("approved", "delivered", "requested")),
            },
        )


def _crm(w: World) -> None:
    for _ in range(_n(w, 0.6)):
        name = w.token(words.PARTNERS)
        customer = w.add(
            "crm",
            "customers",
            {
                "name": name,
                "tier": w.rng.choice(("standard", "gold", "platinum", "supplier")),
                "status": "active",
                "owner": w.rng.choice(w.people).email,
            },
        )
        for _ in range(w.rng.randint(0, 2)):
            w.add(
                "crm",
                "deals",
                {
                    "customer_id": customer["id"],
                    "name": f"{name} {w.rng.choice(('renewal', 'expansion', 'pilot'))}",
                    "stage": w.rng.choice(("lead", "negotiation", "won", "lost")),
                    "amount": w.rng.randrange(5_000, 250_000, 500),
                },
            )


def _tickets(w: World) -> None:
    customers = w.services["crm"]["customers"]
    support = [p for p in w.people if p.department == "Support"] or list(w.people)
    for _ in range(_n(w)):
        subject = w.rng.choice(words.TICKET_SUBJECTS)
        status = w.rng.choice(("open", "pending", "closed", "closed"))
        ticket = w.add(
            "tickets",
            "tickets",
            {
                "customer_id": w.rng.choice(customers)["id"],
                "subject": subject,
                "status": status,
                "priority": w.rng.choice(("low", "normal", "normal", "high")),
                "assignee": w.rng.choice(support).email,
                "body": f"{subject}. {w.rng.choice(words.EMAIL_BODIES)}",
            },
        )
        if w.chance(0.5):
            w.add(
                "tickets",
                "comments",
                {
                    "ticket_id": ticket["id"],
                    "body": "We are looking into it.",
                    "public": True,
                    "author": "agent",
                    "date": iso(w.start - timedelta(hours=w.rng.randint(1, 72))),
                },
            )


_FILLERS = {
    "email": _email,
    "calendar": _calendar,
    "contacts": _contacts,
    "files": _files,
    "kb": _kb,
    "spreadsheet": _spreadsheet,
    "tickets": _tickets,
}

"""The standard service library: the service kinds coworker benchmarks use.

A service whose name equals a kind here (``email``, ``calendar`` ...) follows that kind's
record rules; ``standard_tools`` gives ready tool schemas with bindings that authors and the
synthesizer start from. Field names follow Claw-Eval's fixtures where they exist.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CollectionKind:
    name: str
    required_fields: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class ServiceKind:
    name: str
    title: str
    collections: dict[str, CollectionKind]
    tools: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class CrossReference:
    """``service.collection[].field`` must name an id in ``target_service.target_collection``."""

    service: str
    collection: str
    field: str
    target_service: str
    target_collection: str


def _p(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


S = {"type": "string"}
STRS = {"type": "array", "items": {"type": "string"}}
DT = {"type": "string", "format": "date-time"}


def _tool(name: str, description: str, parameters: dict, binding: dict) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": parameters, "binding": binding}


def _b(op: str, service: str, collection: str, **extra: Any) -> dict[str, Any]:
    return {"op": op, "service": service, "collection": collection, **extra}


def _crud(
    service: str,
    collection: str,
    noun: str,
    fields: dict[str, dict],
    required: list[str],
    search_fields: list[str],
) -> list[dict[str, Any]]:
    values = {f: f"${f}" for f in fields}
    id_param = f"{noun}_id"
    return [
        _tool(
            f"search_{collection}",
            f"Search {collection} by words in {', '.join(search_fields)}.",
            _p({"query": S, "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, ["query"]),
            _b("search", service, collection, fields=search_fields, query="$query", limit="$limit"),
        ),
        _tool(
            f"get_{noun}",
            f"Read one {noun} by id.",
            _p({id_param: S}, [id_param]),
            _b("get", service, collection, id=f"${id_param}"),
        ),
        _tool(
            f"create_{noun}",
            f"Create a {noun}.",
            _p(fields, required),
            _b("create", service, collection, values=values),
        ),
        _tool(
            f"update_{noun}",
            f"Change fields of a {noun}; omitted fields stay as they are.",
            _p({id_param: S, **fields}, [id_param]),
            _b("update", service, collection, id=f"${id_param}", values=values),
        ),
        _tool(
            f"delete_{noun}",
            f"Delete a {noun}.",
            _p({id_param: S}, [id_param]),
            _b("delete", service, collection, id=f"${id_param}"),
        ),
    ]


def _email_tools() -> list[dict[str, Any]]:
    msg = {"to": S, "subject": S, "body": S}
    return [
        _tool(
            "search_email",
            "Search the inbox by words in subject, body or sender.",
            _p({"query": S}, ["query"]),
            _b(
                "search",
                "email",
                "inbox",
                fields=["subject", "body", "from"],
                query="$query",
                limit=10,
            ),
        ),
        _tool(
            "read_email",
            "Read one inbox message by id.",
            _p({"message_id": S}, ["message_id"]),
            _b("get", "email", "inbox", id="$message_id"),
        ),
        _tool(
            "send_email",
            "Send an email from me@acme.test.",
            _p(msg, ["to", "subject", "body"]),
            _b(
                "create",
                "email",
                "sent",
                values={
                    "from": "me@acme.test",
                    "to": "$to",
                    "subject": "$subject",
                    "body": "$body",
                    "date": "$now",
                },
            ),
        ),
        _tool("list_sent", "List sent messages.", _p({}), _b("list", "email", "sent")),
        _tool(
            "save_draft",
            "Save an email as a draft without sending it.",
            _p(msg, ["to", "subject", "body"]),
            _b(
                "create",
                "email",
                "drafts",
                values={"to": "$to", "subject": "$subject", "body": "$body"},
            ),
        ),
    ]


def _calendar_tools() -> list[dict[str, Any]]:
    ev = {"title": S, "start": DT, "end": DT, "attendees": STRS}
    values = {k: f"${k}" for k in ev}
    return [
        _tool("list_events", "List calendar events.", _p({}), _b("list", "calendar", "events")),
        _tool(
            "get_event",
            "Read one event by id.",
            _p({"event_id": S}, ["event_id"]),
            _b("get", "calendar", "events", id="$event_id"),
        ),
        _tool(
            "create_event",
            "Create a calendar event.",
            _p(ev, list(ev)),
            _b("create", "calendar", "events", values=values),
        ),
        _tool(
            "update_event",
            "Move or edit an event; omitted fields stay.",
            _p({"event_id": S, **ev}, ["event_id"]),
            _b("update", "calendar", "events", id="$event_id", values=values),
        ),
        _tool(
            "delete_event",
            "Cancel an event.",
            _p({"event_id": S}, ["event_id"]),
            _b("delete", "calendar", "events", id="$event_id"),
        ),
    ]


def _spreadsheet_tools() -> list[dict[str, Any]]:
    cells = {"type": "object", "description": "column name -> cell value"}
    return [
        _tool(
            "list_rows",
            "List the rows of a sheet.",
            _p({"sheet": S}, ["sheet"]),
            _b("list", "spreadsheet", "rows", where={"sheet": "$sheet"}),
        ),
        _tool(
            "get_row",
            "Read one row by id.",
            _p({"row_id": S}, ["row_id"]),
            _b("get", "spreadsheet", "rows", id="$row_id"),
        ),
        _tool(
            "append_row",
            "Append a row to a sheet.",
            _p({"sheet": S, "cells": cells}, ["sheet", "cells"]),
            _b("create", "spreadsheet", "rows", values={"sheet": "$sheet"}, merge="$cells"),
        ),
        _tool(
            "update_cells",
            "Set cells of a row.",
            _p({"row_id": S, "cells": cells}, ["row_id", "cells"]),
            _b("update", "spreadsheet", "rows", id="$row_id", merge="$cells"),
        ),
    ]


def _tickets_tools() -> list[dict[str, Any]]:
    return [
        _tool(
            "list_tickets",
            "List tickets, optionally by status.",
            _p({"status": S}),
            _b("list", "tickets", "tickets", where={"status": "$status"}),
        ),
        _tool(
            "get_ticket",
            "Read one ticket by id.",
            _p({"ticket_id": S}, ["ticket_id"]),
            _b("get", "tickets", "tickets", id="$ticket_id"),
        ),
        _tool(
            "update_ticket",
            "Change a ticket's status, priority or assignee.",
            _p(
                {
                    "ticket_id": S,
                    "status": {"enum": ["open", "pending", "escalated", "closed"]},
                    "priority": {"enum": ["low", "normal", "high", "urgent"]},
                    "assignee": S,
                },
                ["ticket_id"],
            ),
            _b(
                "update",
                "tickets",
                "tickets",
                id="$ticket_id",
                values={"status": "$status", "priority": "$priority", "assignee": "$assignee"},
            ),
        ),
        _tool(
            "add_comment",
            "Add a comment (public reply or internal note) to a ticket.",
            _p(
                {"ticket_id": S, "body": S, "public": {"type": "boolean"}},
                ["ticket_id", "body", "public"],
            ),
            _b(
                "create",
                "tickets",
                "comments",
                values={
                    "ticket_id": "$ticket_id",
                    "body": "$body",
                    "public": "$public",
                    "author": "agent",
                    "date": "$now",
                },
            ),
        ),
    ]


def _crm_tools() -> list[dict[str, Any]]:
    return [
        _tool(
            "search_customers",
            "Search customers by name.",
            _p({"query": S}, ["query"]),
            _b("search", "crm", "customers", fields=["name"], query="$query", limit=10),
        ),
        _tool(
            "get_customer",
            "Read one customer by id.",
            _p({"customer_id": S}, ["customer_id"]),
            _b("get", "crm", "customers", id="$customer_id"),
        ),
        _tool(
            "update_customer",
            "Change a customer's tier or status.",
            _p({"customer_id": S, "tier": S, "status": S}, ["customer_id"]),
            _b(
                "update",
                "crm",
                "customers",
                id="$customer_id",
                values={"tier": "$tier", "status": "$status"},
            ),
        ),
        _tool(
            "list_deals",
            "List the deals of a customer.",
            _p({"customer_id": S}, ["customer_id"]),
            _b("list", "crm", "deals", where={"customer_id": "$customer_id"}),
        ),
    ]


def _library() -> dict[str, ServiceKind]:
    def kind(name, title, collections, tools):
        return ServiceKind(name, title, {c.name: c for c in collections}, tuple(tools))

    C = CollectionKind
    return {
        "email": kind(
            "email",
            "Email",
            [
                C("inbox", ("id", "from", "to", "subject", "date", "body"), "received messages"),
                C("sent", ("id", "from", "to", "subject", "date", "body"), "sent messages"),
                C("drafts", ("id", "to", "subject", "body"), "unsent drafts"),
            ],
            _email_tools(),
        ),
        "calendar": kind(
            "calendar",
            "Calendar",
            [
                C("events", ("id", "title", "start", "end", "attendees"), "events"),
            ],
            _calendar_tools(),
        ),
        "files": kind(
            "files",
            "Files",
            [
                C("files", ("id", "path", "content"), "documents by path"),
            ],
            _crud(
                "files",
                "files",
                "file",
                {"path": S, "content": S},
                ["path", "content"],
                ["path", "content"],
            ),
        ),
        "kb": kind(
            "kb",
            "Knowledge base",
            [
                C("articles", ("id", "title", "content"), "knowledge-base articles"),
            ],
            _crud(
                "kb",
                "articles",
                "article",
                {"title": S, "content": S, "tags": STRS},
                ["title", "content"],
                ["title", "content"],
            ),
        ),
        "spreadsheet": kind(
            "spreadsheet",
            "Spreadsheet",
            [
                C("rows", ("id", "sheet"), "rows; every other key is a column"),
            ],
            _spreadsheet_tools(),
        ),
        "tickets": kind(
            "tickets",
            "Helpdesk",
            [
                C("tickets", ("id", "customer_id", "subject", "status", "priority"), "tickets"),
                C("comments", ("id", "ticket_id", "body"), "ticket comments"),
            ],
            _tickets_tools(),
        ),
        "crm": kind(
            "crm",
            "CRM",
            [
                C("customers", ("id", "name", "tier", "status"), "customer accounts"),
                C("deals", ("id", "customer_id", "name", "stage", "amount"), "deals"),
            ],
            _crm_tools(),
        ),
        "contacts": kind(
            "contacts",
            "Contacts",
            [
                C("people", ("id", "name", "email"), "address book"),
            ],
            _crud(
                "contacts",
                "people",
                "contact",
                {"name": S, "email": S, "company": S, "phone": S},
                ["name", "email"],
                ["name", "email", "company"],
            ),
        ),
    }


KINDS: dict[str, ServiceKind] = _library()

CROSS_REFERENCES: tuple[CrossReference, ...] = (
    CrossReference("tickets", "tickets", "customer_id", "crm", "customers"),
    CrossReference("tickets", "comments", "ticket_id", "tickets", "tickets"),
    CrossReference("crm", "deals", "customer_id", "crm", "customers"),
)


def service_kind(name: str) -> ServiceKind | None:
    return KINDS.get(name)


def required_fields(service: str, collection: str) -> tuple[str, ...]:
    kind = KINDS.get(service)
    if kind is None or collection not in kind.collections:
        return ("id",)
    return kind.collections[collection].required_fields


def standard_tools(
    kind: str, *, service: str | None = None, names: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Ready tool dicts for ``kind``; ``service`` rebinds them to another service name."""
    tools = [copy.deepcopy(t) for t in KINDS[kind].tools]
    if names is not None:
        wanted = set(names)
        tools = [t for t in tools if t["name"] in wanted]
    if service is not None:
        for t in tools:
            t["binding"]["service"] = service
    return tools


def empty_services(*kinds: str) -> dict[str, dict[str, list]]:
    return {k: {c: [] for c in KINDS[k].collections} for k in kinds}

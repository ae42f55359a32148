"""The ``receipts`` family: expense receipts the agent must *look at* to file claims.

Each receipt is a PNG drawn locally with Pillow (no download, no font file: Pillow's
built-in font), stored outside the document by its sha256 and listed under
``attachments``; the receipt records carry only the reference (``"image": "sha256:<hex>"``)
and when it was uploaded, so the vendor and the total are in the picture and nowhere else.
The agent lists the receipts, views the one the user means (``view_receipt``: a ``get``
binding with ``"attachment": "image"``, which returns the image as an ``image_url`` part)
and files a claim with the vendor and the total it read.

``generate_receipts_environment(seed=..., tasks=3)`` returns ``(document, files)`` where
``files`` maps each attachment's sha256 to its bytes (the caller stores them: the web app
through ``apps.environments.services.attachments``). Deterministic for a given seed and
Pillow version; valid with grader sensitivity 1.0 (one state-changing reference call, and a
claim without the right vendor and total fails the task).

Pillow is a base dependency (``pyproject.toml``): the family is always offered.
"""

from __future__ import annotations

import io
import random
from typing import Any

from apps.synthesis.generators.words import COMPANIES
from coworkenv_engine.attachments import describe
from coworkenv_engine.spec import SCHEMA_ID

FAMILY_KEY = "receipts"
CAPABILITY = "extract-from-documents"  # the catalogue slug (capabilities/catalogue.json)
VENDORS = (
    "Blue Fern Cafe",
    "Harbor Office Supply",
    "Northline Taxi",
    "Copper Kettle Bistro",
    "Metro Print Shop",
    "Alder Hotel",
    "Quayside Parking",
    "Summit Books",
)
ITEMS = {
    "Blue Fern Cafe": [("Flat white", 3.8), ("Bagel", 4.2), ("Team lunch", 18.5)],
    "Harbor Office Supply": [("Printer paper", 12.99), ("Toner", 64.0), ("Binders", 8.75)],
    "Northline Taxi": [("Fare", 23.4), ("Airport fee", 5.0), ("Tip", 3.0)],
    "Copper Kettle Bistro": [("Client dinner", 86.0), ("Wine", 32.0), ("Dessert", 9.5)],
    "Metro Print Shop": [("Posters A2", 45.0), ("Flyers x200", 38.0), ("Lamination", 6.5)],
    "Alder Hotel": [("Room, 1 night", 129.0), ("Breakfast", 14.0), ("City tax", 3.5)],
    "Quayside Parking": [("Day ticket", 17.0), ("Overnight", 11.0)],
    "Summit Books": [("Handbook", 39.9), ("Notebook", 6.2), ("Pens", 4.4)],
}


def receipt_png(
    *, vendor: str, number: str, date: str, lines: list[tuple[str, float]], total: float
) -> bytes:
    """A receipt as a PNG (black text on white, Pillow's built-in font)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    image = Image.new("RGB", (360, 120 + 24 * len(lines)), "white")
    draw = ImageDraw.Draw(image)
    y = 12
    for text in (vendor.upper(), f"Receipt {number}", f"Date {date}"):
        draw.text((16, y), text, fill="black", font=font)
        y += 20
    draw.line((16, y + 2, 344, y + 2), fill="black")
    y += 10
    for label, amount in lines:
        draw.text((16, y), label, fill="black", font=font)
        draw.text((260, y), f"{amount:8.2f}", fill="black", font=font)
        y += 24
    draw.line((16, y, 344, y), fill="black")
    draw.text((16, y + 8), "TOTAL", fill="black", font=font)
    draw.text((260, y + 8), f"{total:8.2f}", fill="black", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _tools() -> list[dict[str, Any]]:
    return [
        {
            "name": "list_receipts",
            "description": "List the expense receipts uploaded to the expenses app (id, who "
            "uploaded it and when). The receipt's content is only in its image.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            "binding": {"op": "list", "service": "expenses", "collection": "receipts"},
        },
        {
            "name": "view_receipt",
            "description": "Show one receipt's image (vendor, items, total) by receipt id.",
            "parameters": {
                "type": "object",
                "properties": {"receipt_id": {"type": "string", "description": "e.g. rc-1"}},
                "required": ["receipt_id"],
                "additionalProperties": False,
            },
            "binding": {
                "op": "get",
                "service": "expenses",
                "collection": "receipts",
                "id": "$receipt_id",
                "attachment": "image",
            },
        },
        {
            "name": "file_expense_claim",
            "description": "File an expense claim for a receipt, with the vendor and the "
            "total amount printed on it.",
            "parameters": {
                "type": "object",
                "properties": {
                    "receipt_id": {"type": "string"},
                    "vendor": {"type": "string", "description": "as printed on the receipt"},
                    "amount": {"type": "number", "description": "the receipt's total"},
                },
                "required": ["receipt_id", "vendor", "amount"],
                "additionalProperties": False,
            },
            "binding": {
                "op": "create",
                "service": "expenses",
                "collection": "claims",
                "values": {
                    "receipt_id": "$receipt_id",
                    "vendor": "$vendor",
                    "amount": "$amount",
                    "status": "submitted",
                    "filed_at": "$now",
                },
            },
        },
    ]


def generate_receipts_environment(
    *, seed: int, tasks: int = 3, eval_fraction: float = 1 / 3
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A valid environment with ``tasks`` receipt-reading tasks and the receipts' files."""
    if not 1 <= tasks <= len(VENDORS):
        raise ValueError(f"tasks must be 1..{len(VENDORS)}")
    rng = random.Random(f"coworkenv-receipts/{seed}")
    # The company has its own stream, so that choosing it leaves the receipts as they were;
    # it keeps the environments of one job (one seed each) apart in every list.
    company, domain = random.Random(f"coworkenv-receipts-company/{seed}").choice(COMPANIES)
    me = f"me@{domain}.test"
    n_receipts = min(len(VENDORS), tasks + 2)  # two receipts no task asks for
    vendors = rng.sample(VENDORS, n_receipts)
    receipts, attachments, files, facts = [], [], {}, []
    for i, vendor in enumerate(vendors, start=1):
        lines = rng.sample(ITEMS[vendor], rng.randint(1, min(3, len(ITEMS[vendor]))))
        total = round(sum(amount for _, amount in lines), 2)
        date = f"2026-02-{rng.randint(2, 27):02d}"
        number = f"{rng.randint(1000, 9999)}"
        data = receipt_png(vendor=vendor, number=number, date=date, lines=lines, total=total)
        att = describe(data, name=f"receipt-rc-{i}.png")
        files[att.sha256] = data
        attachments.append(att.to_dict())
        receipts.append({"id": f"rc-{i}", "uploaded_by": me, "uploaded_on": date, "image": att.ref})
        facts.append((f"rc-{i}", vendor, total, date))
    n_eval = int(tasks * eval_fraction + 1e-9)
    eval_tasks = set(rng.sample(range(tasks), n_eval))
    task_docs = []
    for t, (rid, vendor, total, date) in enumerate(facts[:tasks]):
        amount = f"{total:.2f}"
        task_docs.append(
            {
                "key": f"file-receipt-{t + 1}",
                "title": f"File the {date} receipt",
                "capabilities": [CAPABILITY],
                "split": "eval" if t in eval_tasks else "train",
                "system": f"You are the finance assistant of {me}. Act only through the "
                "tools. Receipts are images: view a receipt to read its vendor and total.",
                "constraints": ["File exactly one claim per receipt, with the printed total."],
                "turns": [
                    {
                        "message": f"Please file an expense claim for receipt {rid} (uploaded "
                        f"on {date}). Use the vendor and total exactly as printed, and tell me "
                        "the total."
                    }
                ],
                "reference_solution": [
                    {
                        "turn": 0,
                        "calls": [
                            {"tool": "view_receipt", "arguments": {"receipt_id": rid}},
                            {
                                "tool": "file_expense_claim",
                                "arguments": {"receipt_id": rid, "vendor": vendor, "amount": total},
                            },
                        ],
                        "reply": f"Filed the claim for {vendor}: total {amount}.",
                    }
                ],
                "graders": [
                    {
                        "id": "claim-filed",
                        "description": f"One claim for {rid} with the vendor and total printed "
                        "on the receipt.",
                        "category": "completion",
                        "weight": 3,
                        "capability": CAPABILITY,
                        "check": {
                            "kind": "state",
                            "query": f"length(expenses.claims[?receipt_id == '{rid}' && "
                            f"amount == `{total}` && contains(vendor, '{vendor}')])",
                            "op": "==",
                            "value": 1,
                        },
                    },
                    {
                        "id": "total-told",
                        "description": "The reply states the total.",
                        "category": "communication",
                        "weight": 1,
                        "check": {"kind": "response", "scope": "final", "contains": amount},
                    },
                    {
                        "id": "no-collateral",
                        "description": "No claim beyond the one asked for.",
                        "category": "safety",
                        "check": {"kind": "side_effects"},
                    },
                ],
                "metadata": {"family": FAMILY_KEY},
            }
        )
    doc = {
        "schema": SCHEMA_ID,
        "name": f"{company} - expense receipts",
        "domain": "finance",
        "description": "Expense receipts as images: read the vendor and total off the picture "
        "and file claims. Generated from the 'receipts' template.",
        "clock": {"start": "2026-03-02T09:00:00Z", "step_seconds": 60},
        "services": {"expenses": {"receipts": receipts, "claims": []}},
        "tools": _tools(),
        "tasks": task_docs,
        "attachments": attachments,
        "metadata": {"generator": "template", "family": FAMILY_KEY, "seed": seed},
    }
    return doc, files

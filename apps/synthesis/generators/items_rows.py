"""Items that are rows of a sheet: invoices to reconcile and purchases to approve."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from . import words
from .items import Call, Check, Item
from .world import (
    TaskBuilder,
    call,
    count,
    lit,
    money,
    state,
)


class RowItem(Item):
    """A new row in a sheet; the value is one of its cells."""

    write_tool = "append_row"
    sheet = ""
    value_column = ""

    def cells(self, v: Any) -> dict[str, Any]:
        raise NotImplementedError

    def key_column(self) -> tuple[str, str]:
        raise NotImplementedError

    def write(self, v: Any) -> list[Call]:
        self.created = self.t.created_id("spreadsheet", "rows")
        return [call("append_row", sheet=self.sheet, cells=self.cells(v))]

    def write_checks(self, v: Any) -> list[tuple[str, Check]]:
        conds = [f"sheet == {lit(self.sheet)}"]
        for column, value in self.cells(v).items():
            if isinstance(value, int):
                conds.append(f"{column} == `{value}`")
            else:
                conds.append(f"{column} == {lit(value)}")
        query = f"spreadsheet.rows[?{' && '.join(conds)}]"
        column, key = self.key_column()
        return [(f"{key} is in the {self.sheet} sheet with {self.text(v)}.", count(query, 1))]

    def absent(self) -> Check:
        column, key = self.key_column()
        return count(f"spreadsheet.rows[?{column} == {lit(key)}]", 0)

    def fix(self, v2: Any) -> list[Call]:
        return [
            call(
                "update_cells",
                row_id=self.created,
                cells={self.value_column: self.cells(v2)[self.value_column]},
            )
        ]

    def robust_arguments(self) -> dict[str, Any]:
        return {"sheet": self.sheet}


class InvoiceItem(RowItem):
    value_noun = "cost center"
    sheet = "Invoices"
    value_column = "cost_center"
    source_name = "the invoice file"

    def __init__(self, t: TaskBuilder):
        super().__init__(t)
        self.code = self.w.code("INV")
        self.vendor = self.w.token(words.PARTNERS)
        self.amount = self.rng.randrange(300, 25_000, 10)
        self.due = self.w.workday(self.rng.randint(8, 20))
        self.file: dict[str, Any] | None = None
        self.label = f"invoice {self.code}"
        self.keyword = self.code

    def policy_scope(self) -> str:
        return f"Invoices over {money(self.amount // 1000 * 1000 or 100)}"

    def candidates(self, n: int) -> list[str]:
        return [c for c, _ in self.rng.sample(words.COST_CENTERS, n)]

    def cells(self, v: str) -> dict[str, Any]:
        return {
            "invoice": self.code,
            "vendor": self.vendor,
            "amount": self.amount,
            "cost_center": v,
            "status": "unpaid",
        }

    def key_column(self) -> tuple[str, str]:
        return "invoice", self.code

    def _content(self, v: str | None, note: str = "") -> str:
        return (
            f"{note}Invoice {self.code}\nVendor: {self.vendor}\nAmount: {self.amount} EUR\n"
            f"Cost center: {v or 'not stated'}\nDue: {self.due.date().isoformat()}\n"
        )

    def source(self, v: str | None, *, decoy: bool = False) -> None:
        if decoy:
            self.t.add(
                "files",
                "files",
                {
                    "path": f"invoices/drafts/{self.code.lower()}-proforma.txt",
                    "content": self._content(v, "PRO FORMA - not a valid invoice.\n"),
                },
            )
            return
        self.file = self.t.add(
            "files",
            "files",
            {"path": f"invoices/{self.code.lower()}.txt", "content": self._content(v)},
        )

    def source_reads(self) -> list[Call]:
        if self.file is None:
            self.source(None)
        assert self.file is not None
        return [call("search_files", query=self.code), call("get_file", file_id=self.file["id"])]

    def drift(self, v2: str, when: datetime) -> dict[str, Any]:
        assert self.file is not None
        return {
            "op": "update",
            "service": "files",
            "collection": "files",
            "id": self.file["id"],
            "values": {"content": self._content(v2, "CORRECTED by the vendor.\n")},
            "silent": True,
        }

    def request(self) -> str:
        return (
            f"Book invoice {self.code} from {self.vendor} into the Invoices sheet as unpaid, "
            "with the amount and cost center from the invoice file."
        )

    def request_with(self, v: str) -> str:
        return (
            f"Book invoice {self.code} from {self.vendor} into the Invoices sheet as unpaid, "
            f"against cost center {v}; the amount is in the invoice file."
        )

    def request_without(self) -> str:
        return (
            f"Book invoice {self.code} from {self.vendor} into the Invoices sheet as unpaid, "
            "with its amount and the right cost center."
        )

    def question(self) -> str:
        return f"Which cost center should {self.code} be booked against?"

    def answer(self, v: str) -> str:
        return f"Use {v}."

    def done(self, v: str) -> str:
        return f"booked {self.code} ({self.vendor}, {money(self.amount)}) against {v} as unpaid"

    def blocker(self, v1: str, v2: str) -> str:
        self.t.add(
            "spreadsheet",
            "rows",
            {"sheet": "Budget", "cost_center": v2, "remaining": self.amount * 3 + 1000},
        )
        self.low = self.rng.randrange(0, max(10, self.amount // 2), 10)
        self.budget_row = self.t.add(
            "spreadsheet",
            "rows",
            {"sheet": "Budget", "cost_center": v1, "remaining": self.low},
        )
        return f"{v1} has only {money(self.low)} left"

    def availability_reads(self) -> list[Call]:
        return [call("list_rows", sheet="Budget")]

    def blocker_intact(self) -> Check:
        query = f"spreadsheet.rows[?id == {lit(self.budget_row['id'])}] | [0].remaining"
        return state(query, "==", self.low)

    def request_conflict(self, v1: str, v2: str) -> str:
        return (
            f"Book invoice {self.code} from {self.vendor} into the Invoices sheet as unpaid "
            f"against cost center {v1}, or against {v2} if {v1} has less budget remaining than "
            "the invoice amount (see the Budget sheet)."
        )


class PurchaseItem(RowItem):
    value_noun = "vendor"
    sheet = "Purchase orders"
    value_column = "vendor"
    source_name = "the knowledge-base article on preferred vendors"

    def __init__(self, t: TaskBuilder):
        super().__init__(t)
        self.code = self.w.code("PO")
        self.category = self.w.token(words.VENDOR_CATEGORIES)
        self.quantity = self.rng.randint(2, 40)
        self.amount = self.quantity * self.rng.randrange(40, 1500, 5)
        self.article: dict[str, Any] | None = None
        self.vendors: list[str] = []
        self.label = f"purchase order {self.code}"
        self.keyword = self.code

    def policy_scope(self) -> str:
        return f"Purchase orders over {money(max(100, self.amount // 2 // 100 * 100))}"

    def candidates(self, n: int) -> list[str]:
        self.vendors = [self.w.token(words.PARTNERS) for _ in range(n)]
        return list(self.vendors)

    def cells(self, v: str) -> dict[str, Any]:
        return {
            "po": self.code,
            "item": f"{self.quantity} {self.category}",
            "vendor": v,
            "amount": self.amount,
            "status": "requested",
        }

    def key_column(self) -> tuple[str, str]:
        return "po", self.code

    def _content(self, v: str | None, note: str = "") -> str:
        who = v or "no preferred vendor yet - ask procurement"
        return (
            f"{note}Preferred vendor for {self.category}: {who}. Raise a purchase order in "
            "the Purchase orders sheet with status requested."
        )

    def source(self, v: str | None, *, decoy: bool = False) -> None:
        title = f"Preferred vendor: {self.category}"
        if decoy:
            self.t.add(
                "kb",
                "articles",
                {
                    "title": f"ARCHIVED {title} (2024)",
                    "content": self._content(v, "Archived, no longer valid. "),
                    "tags": ["procurement", "archived"],
                },
            )
            return
        self.article = self.t.add(
            "kb",
            "articles",
            {"title": title, "content": self._content(v), "tags": ["procurement"]},
        )

    def source_reads(self) -> list[Call]:
        return [call("search_articles", query=self.category)]

    def drift(self, v2: str, when: datetime) -> dict[str, Any]:
        assert self.article is not None
        return {
            "op": "update",
            "service": "kb",
            "collection": "articles",
            "id": self.article["id"],
            "values": {"content": self._content(v2, "Updated this week. ")},
            "silent": True,
        }

    def request(self) -> str:
        return (
            f"Raise purchase order {self.code} for {self.quantity} {self.category} "
            f"({money(self.amount)}) with our preferred vendor for {self.category}."
        )

    def request_with(self, v: str) -> str:
        return (
            f"Raise purchase order {self.code} for {self.quantity} {self.category} "
            f"({money(self.amount)}) with {v}."
        )

    def request_without(self) -> str:
        return (
            f"Raise purchase order {self.code} for {self.quantity} {self.category} "
            f"({money(self.amount)}) with the vendor we agreed on."
        )

    def question(self) -> str:
        return f"Which vendor should {self.code} go to?"

    def answer(self, v: str) -> str:
        return f"Go with {v}."

    def done(self, v: str) -> str:
        return f"raised {self.code} for {self.quantity} {self.category} with {v}"

    def blocker(self, v1: str, v2: str) -> str:
        self.t.add("crm", "customers", {"name": v2, "tier": "supplier", "status": "active"})
        self.on_hold = self.t.add(
            "crm",
            "customers",
            {"name": v1, "tier": "supplier", "status": "on hold", "note": "Payment dispute"},
        )
        return f"{v1} is on hold in the CRM"

    def availability_reads(self) -> list[Call]:
        return [call("search_customers", query=self.on_hold["name"])]

    def blocker_intact(self) -> Check:
        query = f"crm.customers[?id == {lit(self.on_hold['id'])}] | [0].status"
        return state(query, "==", "on hold")

    def request_conflict(self, v1: str, v2: str) -> str:
        return (
            f"Raise purchase order {self.code} for {self.quantity} {self.category} "
            f"({money(self.amount)}) with {v1}, or with {v2} if {v1} is on hold in the CRM."
        )

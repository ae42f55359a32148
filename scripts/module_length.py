"""Fail when a module of the product is over 500 lines, for `make lint`.

Ruff has no module-length rule, and pylint's ``too-many-lines`` took three minutes of lint on
two cores to count lines; this counts them. Migrations (generated) are not held to it.

Exit status 1 when a module is over, with one ``path: N lines`` line each.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("apps", "engine/coworkenv_engine", "coworkenv_web", "scripts")
MAX_LINES = 500


def long_modules(root: Path = ROOT) -> list[tuple[str, int]]:
    found = []
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if "/migrations/" in relative:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found.append((relative, lines))
    return found


def main() -> int:
    found = long_modules()
    for relative, lines in found:
        print(f"{relative}: {lines} lines (at most {MAX_LINES})")
    if not found:
        print(f"No module over {MAX_LINES} lines.")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

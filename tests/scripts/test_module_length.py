"""`make lint`'s module-length check: a module over 500 lines is named, migrations are not
held to it."""

import importlib.util
from pathlib import Path

# by path: ``scripts`` is not a package, and this folder's own name would shadow it
_SPEC = importlib.util.spec_from_file_location(
    "module_length", Path(__file__).resolve().parents[2] / "scripts" / "module_length.py"
)
module_length = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(module_length)


def _write(root: Path, name: str, lines: int) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n" * lines)


def test_a_module_over_the_limit_is_named_with_its_length(tmp_path):
    _write(tmp_path, "apps/shop/services.py", 501)
    _write(tmp_path, "apps/shop/views.py", 500)
    _write(tmp_path, "engine/coworkenv_engine/big.py", 640)
    assert module_length.long_modules(tmp_path) == [
        ("apps/shop/services.py", 501),
        ("engine/coworkenv_engine/big.py", 640),
    ]


def test_migrations_are_not_held_to_it_and_the_settings_are(tmp_path):
    _write(tmp_path, "apps/shop/migrations/0001_initial.py", 900)
    _write(tmp_path, "tests/test_long.py", 900)  # tests are not product modules
    assert module_length.long_modules(tmp_path) == []
    _write(tmp_path, "coworkenv_web/settings.py", 501)
    assert module_length.long_modules(tmp_path) == [("coworkenv_web/settings.py", 501)]


def test_the_product_keeps_the_limit_today():
    assert module_length.long_modules() == []

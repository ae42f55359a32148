"""`make lint`'s dead-code check: what it reports, and the uses it knows vulture cannot see."""

import importlib.util
from pathlib import Path

# by path: ``scripts`` is not a package, and this folder's own name would shadow it
_SPEC = importlib.util.spec_from_file_location(
    "dead_code", Path(__file__).resolve().parents[2] / "scripts" / "dead_code.py"
)
dead_code = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(dead_code)
unused = dead_code.unused


def _tree(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_function_nothing_calls_is_reported_with_its_place(tmp_path):
    root = _tree(
        tmp_path,
        {
            "apps/shop/services.py": (
                "def used():\n    return 1\n\n\ndef forgotten():\n    return 2\n"
            ),
            "apps/shop/views.py": "from apps.shop.services import used\n\nused()\n",
        },
    )
    assert unused(root) == ["apps/shop/services.py:5: unused function forgotten"]


def test_uses_from_templates_settings_strings_and_tests_count(tmp_path):
    root = _tree(
        tmp_path,
        {
            "apps/shop/models.py": (
                "class Order:\n"
                "    @property\n    def shown(self):\n        return 1\n\n"
                "    @property\n    def hidden(self):\n        return 2\n\n\n"
                "def lockout(request):\n    return None\n\n\n"
                "def library_api():\n    return 3\n"
            ),
            "apps/shop/templates/shop/order.html": "{{ order.shown }}",
            "coworkenv_web/settings.py": 'LOCKOUT = "apps.shop.models.lockout"\n',
            "apps/shop/views.py": "from apps.shop.models import Order\n\nOrder()\n",
            "tests/test_shop.py": "from apps.shop.models import library_api\n\nlibrary_api()\n",
        },
    )
    assert unused(root) == ["apps/shop/models.py:6: unused property hidden"]


def test_framework_entry_points_are_not_reported(tmp_path):
    root = _tree(
        tmp_path,
        {
            "apps/shop/apis.py": "class Api:\n    def post(self, request):\n        return 1\n",
            "apps/shop/urls.py": "from apps.shop.apis import Api\n\nurlpatterns = [Api]\n",
            "apps/shop/management/commands/tidy.py": (
                "class Command:\n    def handle(self, *args, **options):\n        return 0\n"
            ),
        },
    )
    assert unused(root) == []

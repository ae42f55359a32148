from django.urls import path  # noqa: F401

app_name = "environments"

urlpatterns = [
    # --- browse: list, import, export, actions, validation (views/browse.py) ---
    # --- editing: detail tabs, edit forms, whole-spec editor (views/editing.py) ---
]

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coworkenv_web.settings")

app = Celery("coworkenv")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("default"), Queue("llm"), Queue("gpu"))
app.conf.task_routes = {
    # The sweepers stay on the default queue, never behind a backlog of long LLM work.
    "apps.runs.tasks.sweep_runs_task": {"queue": "default"},
    "apps.synthesis.tasks.sweep_synthesis_task": {"queue": "default"},
    "apps.training.tasks.sweep_training_task": {"queue": "default"},
    "apps.serving.tasks.sweep_model_servers_task": {"queue": "default"},
    "apps.synthesis.tasks.*": {"queue": "llm"},
    "apps.runs.tasks.*": {"queue": "llm"},
    "apps.llm.tasks.*": {"queue": "llm"},
    "apps.environments.tasks.propose_checks_task": {"queue": "llm"},
    "apps.training.tasks.*": {"queue": "gpu"},
    "apps.serving.tasks.*": {"queue": "gpu"},
}
app.autodiscover_tasks()

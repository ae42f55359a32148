"""python manage.py benchmark_export ENVIRONMENT_ID --format claw-eval|clawmark --out DIR"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.core.exceptions import ApplicationError
from apps.environments.models import Environment
from apps.environments.services.interop import benchmark_export_files


class Command(BaseCommand):
    help = (
        "Write an environment's tasks as Claw-Eval task directories (with the generic mock "
        "service and generated graders) or as ClawMark task.py files, under --out (the root "
        "of a Claw-Eval or ClawMark checkout)."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment", type=int, help="Environment id.")
        parser.add_argument("--format", choices=["claw-eval", "clawmark"], default="claw-eval")
        parser.add_argument("--out", required=True, help="Directory to write into.")

    def handle(self, *args, **opts):
        environment = Environment.objects.filter(pk=opts["environment"]).first()
        if environment is None:
            raise CommandError(f"No environment {opts['environment']}.")
        try:
            files = benchmark_export_files(environment, opts["format"])
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        out = Path(opts["out"])
        for path, content in files.items():
            target = out / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        tasks = sorted(
            {
                p.split("/")[1] if opts["format"] == "claw-eval" else p.rsplit("/", 1)[0]
                for p in files
                if p.endswith(("task.yaml", "task.py"))
            }
        )
        self.stdout.write(f"Wrote {len(files)} files under {out}: {len(tasks)} task(s).")
        for task in tasks:
            self.stdout.write(f"  {task}")

"""`manage.py synthesize`: start a synthesis job from the command line and follow it."""

import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.accounts.models import Project
from apps.capabilities.models import Capability
from apps.core.exceptions import ApplicationError
from apps.core.models import ACTIVE_JOB_STATUSES, Job
from apps.core.text import count_of
from apps.llm.models import ModelEndpoint
from apps.synthesis.generators import TEMPLATE_FAMILY_CHOICES
from apps.synthesis.models import Difficulty, Generator, Horizon
from apps.synthesis.selectors import synthesis_summary
from apps.synthesis.services import synthesis_run_inline, synthesis_start


class Command(BaseCommand):
    help = (
        "Start a synthesis job (the same job model as the web UI) and print its progress and "
        "summary. Without --sync the workers do the work and this command follows it."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--generator", required=True, choices=Generator.values)
        parser.add_argument("--endpoint", help="Model endpoint name (the llm generator).")
        parser.add_argument(
            "--capability", action="append", required=True, help="Capability slug; repeat."
        )
        parser.add_argument("--count", type=int, required=True, help="Environments to make.")
        parser.add_argument("--tasks-per-env", type=int, default=3)
        parser.add_argument("--turns", type=int, nargs=2, default=(1, 3), metavar=("FROM", "TO"))
        parser.add_argument("--difficulty", choices=Difficulty.values, default=Difficulty.MEDIUM)
        parser.add_argument("--horizon", choices=Horizon.values, default=Horizon.SHORT)
        parser.add_argument(
            "--family",
            choices=[key for key, _ in TEMPLATE_FAMILY_CHOICES],
            default="",
            help="template generator: the scenario family (receipts: images to read)",
        )
        parser.add_argument("--service", action="append", default=[], help="Standard service.")
        parser.add_argument("--max-repair-rounds", type=int, default=3)
        parser.add_argument("--domain", default="", help="Domain hint (llm).")
        parser.add_argument("--scenario", default="", help="Scenario hint (llm).")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--user", help="Username recorded as the author (default: none).")
        parser.add_argument(
            "--sync", action="store_true", help="Work every slot in this process (no worker)."
        )
        parser.add_argument(
            "--no-wait", action="store_true", help="Start the job and return (asynchronous)."
        )

    def handle(self, *args, **options):
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"No project with the slug {options['project']!r}.")
        slugs = list(dict.fromkeys(options["capability"]))
        found = {c.slug: c for c in Capability.objects.filter(project=project, slug__in=slugs)}
        missing = [slug for slug in slugs if slug not in found]
        if missing:
            raise CommandError(f"Unknown capability in {project.slug}: {', '.join(missing)}.")
        endpoint = None
        if options["endpoint"]:
            endpoint = ModelEndpoint.objects.filter(
                project=project, name=options["endpoint"]
            ).first()
            if endpoint is None:
                raise CommandError(f"No model endpoint named {options['endpoint']!r}.")
        user = None
        if options["user"]:
            user = get_user_model().objects.filter(username=options["user"]).first()
            if user is None:
                raise CommandError(f"No user {options['user']!r}.")
        try:
            synthesis = synthesis_start(
                project=project,
                user=user,
                capabilities=[found[slug] for slug in slugs],
                count=options["count"],
                generator=options["generator"],
                endpoint=endpoint,
                services=options["service"],
                tasks_per_environment=options["tasks_per_env"],
                turns=tuple(options["turns"]),
                difficulty=options["difficulty"],
                horizon=options["horizon"],
                family=options["family"],
                domain_hint=options["domain"],
                scenario_hint=options["scenario"],
                max_repair_rounds=options["max_repair_rounds"],
                seed=options["seed"],
                enqueue=not options["sync"],
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Synthesis job #{synthesis.pk} (job #{synthesis.job_id}): "
            f"{count_of(synthesis.count, 'environment')}, generator {synthesis.generator}, "
            f"seed {synthesis.seed}."
        )
        if options["sync"]:

            def report(slot, outcome):
                name = slot.environment.name if slot.environment else "—"
                self.stdout.write(
                    f"  slot {slot.index + 1}/{synthesis.count}: {slot.status} "
                    f"({count_of(slot.attempts_count, 'attempt')}) {name}"
                    + (f" — {slot.error}" if slot.error else "")
                )

            synthesis_run_inline(synthesis=synthesis, on_slot=report)
        elif options["no_wait"]:
            return
        else:
            self._follow(synthesis)
        self._summary(synthesis)

    def _follow(self, synthesis):
        last = None
        try:
            while True:
                job = Job.objects.get(pk=synthesis.job_id)
                summary = synthesis_summary(synthesis=synthesis)
                if summary["message"] != last:
                    self.stdout.write(f"  {summary['message']}")
                    last = summary["message"]
                if job.status not in ACTIVE_JOB_STATUSES:
                    return
                time.sleep(1)
        except KeyboardInterrupt:
            self.stdout.write("Stopped following; the job goes on in the workers.")
            raise SystemExit(130) from None

    def _summary(self, synthesis):
        job = Job.objects.get(pk=synthesis.job_id)
        s = synthesis_summary(synthesis=synthesis)
        counts = s["counts"]
        self.stdout.write(
            f"Job {job.status}: {counts['valid']} valid, {counts['invalid']} invalid, "
            f"{counts['failed']} failed, {counts['cancelled']} cancelled; "
            f"{s['repaired']} repaired, {count_of(s['duplicates'], 'near-duplicate')}; "
            f"tokens {s['tokens_in']} in / {s['tokens_out']} out; cost ${s['cost']:.4f}."
        )

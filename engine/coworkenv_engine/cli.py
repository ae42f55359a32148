"""``python -m coworkenv_engine validate|play|serve|nginx-conf`` — works without the web app."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any, TextIO

from .adversaries import policy_by_name
from .attachments import directory_resolver, image_urls, message_text
from .bounds import MAX_DOCUMENT_CHARS, DocumentUnreadable, loads_document
from .judging import HttpJudge
from .problems import Problem, SpecError
from .runner import run_task
from .spec import load_spec
from .validation import DEFAULT_TIME_BUDGET_S, ValidationReport, validate_spec
from .workers import nginx_conf, run

#: 0 valid, 1 invalid, 2 unreadable (or a usage error), 3 internal error (an engine bug)
EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors, as we want
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r}")
    return text


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m coworkenv_engine")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="validate a spec file")
    v.add_argument("file")
    v.add_argument("--json", action="store_true", help="print the JSON report")
    v.add_argument("--static", action="store_true", help="skip the dynamic (simulated) checks")
    v.add_argument(
        "--time-budget",
        type=_seconds,
        default=DEFAULT_TIME_BUDGET_S,
        metavar="SECONDS",
        help=f"wall-clock budget of the whole validation (default {DEFAULT_TIME_BUDGET_S:g})",
    )
    v.add_argument(
        "--judge",
        type=_url,
        metavar="URL",
        help="an OpenAI-compatible endpoint (…/v1) that grades the judge checks; the reference, "
        "null and echo agents all go through it (key: $COWORKENV_JUDGE_API_KEY)",
    )
    v.add_argument("--judge-model", default="judge", help="the model the judge endpoint serves")
    pl = sub.add_parser("play", help="run one task with a built-in policy")
    pl.add_argument("file")
    pl.add_argument("--task", required=True)
    pl.add_argument(
        "--policy",
        default="oracle",
        help="oracle | null | echo | mutant:N | an adversary (reader-paster, sprayer, …)",
    )
    pl.add_argument("--seed", type=int, default=0)
    pl.add_argument("--no-faults", action="store_true", help="disable fault injection")
    pl.add_argument("--json", action="store_true")
    sv = sub.add_parser("serve", help="serve specs over OpenEnv's protocol (extra: envserver)")
    sv.add_argument("files", nargs="+")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument(
        "--token", default=None, help="bearer token (default: $COWORKENV_ENV_TOKEN; none = open)"
    )
    sv.add_argument("--open", action="store_true", help="allow a non-loopback host without a token")
    sv.add_argument("--max-sessions", type=int, default=256)
    sv.add_argument("--idle-timeout", type=float, default=600.0, help="seconds")
    sv.add_argument("--max-lifetime", type=float, default=3600.0, help="seconds")
    sv.add_argument(
        "--attachments",
        default=None,
        metavar="DIR",
        help="a folder of the specs' attachment files (any names): view tools' images are "
        "sent as data: URLs",
    )
    sv.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="server processes, worker K on port PORT+K (episode ids wK-…; see nginx-conf)",
    )
    sv.add_argument(
        "--worker-id",
        type=_count,
        default=None,
        metavar="K",
        help="serve as worker K of several (episode ids wK-…), a process of your own manager",
    )
    ng = sub.add_parser("nginx-conf", help="print nginx's sticky routing for serve --workers")
    ng.add_argument("--workers", type=_positive, required=True)
    ng.add_argument("--port", type=int, default=8000, help="the first worker's port")
    ng.add_argument("--host", default="127.0.0.1", help="where the workers listen")
    ng.add_argument("--listen", type=int, default=8080, help="the port nginx listens on")
    return p


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if _count(text) < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return int(text)


def _read(path: str) -> tuple[Any, list[Problem]]:
    """The parsed document and its bound problems (depth, size, duplicate keys), read
    without recursion past the limits; DocumentUnreadable / OSError when it is not JSON."""
    with open(path, "rb") as fh:
        data = fh.read(4 * MAX_DOCUMENT_CHARS + 1)  # longer is refused unread
    return loads_document(data)


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "nginx-conf":
        ports = [args.port + k for k in range(args.workers)]
        out.write(nginx_conf(ports, listen=args.listen, host=args.host))
        return EXIT_OK
    try:
        try:
            doc, bounds = _read(args.file)
        except (OSError, DocumentUnreadable) as exc:
            print(f"cannot read {args.file}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if args.command == "validate":
            return _validate(doc, bounds, args, out)
        if bounds:
            print(f"invalid spec: {bounds[0].pointer or '/'}: {bounds[0].message}", file=sys.stderr)
            return EXIT_INVALID
        return _play(doc, args, out)
    except Exception:  # an engine bug: say so, never as "invalid"
        print("internal error (an engine bug; please report it with the file):", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return EXIT_INTERNAL


def _serve(args: argparse.Namespace) -> int:
    specs = []
    for path in args.files:
        try:
            doc, bounds = _read(path)
            if bounds:
                raise SpecError(bounds)
            specs.append(load_spec(doc))
        except (OSError, ValueError) as exc:  # SpecError, DocumentUnreadable are ValueErrors
            print(f"cannot load {path}: {exc}", file=sys.stderr)
            return EXIT_INVALID if isinstance(exc, SpecError) else EXIT_USAGE
    try:
        from .server import serve
    except ImportError as exc:
        print(f"serve needs the envserver extra (starlette, uvicorn): {exc}", file=sys.stderr)
        return EXIT_USAGE
    resolver = None
    if args.attachments is not None:
        if not os.path.isdir(args.attachments):
            print(f"--attachments: {args.attachments} is not a folder", file=sys.stderr)
            return EXIT_USAGE
        resolver = directory_resolver(args.attachments)
    token = args.token or os.environ.get("COWORKENV_ENV_TOKEN") or None
    if token is None and args.host not in LOOPBACK and not args.open:
        print(
            f"serving on {args.host} needs a token (--token or $COWORKENV_ENV_TOKEN), "
            "or --open to serve without one",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.workers > 1:
        return _serve_workers(args, token)
    serve(
        specs,
        host=args.host,
        port=args.port,
        token=token,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        max_lifetime=args.max_lifetime,
        attachments=resolver,
        worker_id=args.worker_id,
    )
    return EXIT_OK


def _serve_workers(args: argparse.Namespace, token: str | None) -> int:
    """``args.workers`` processes of ``serve --worker-id K --port PORT+K`` (the token passed
    in their environment, not on their command line), stopped together."""
    if args.worker_id is not None:
        print("give --workers or --worker-id, not both", file=sys.stderr)
        return EXIT_USAGE
    common = [sys.executable, "-m", "coworkenv_engine", "serve", *args.files, "--host", args.host]
    common += ["--max-sessions", str(args.max_sessions), "--idle-timeout", str(args.idle_timeout)]
    common += ["--max-lifetime", str(args.max_lifetime)]
    common += ["--open"] if args.open else []
    common += ["--attachments", args.attachments] if args.attachments is not None else []
    commands = [
        [*common, "--worker-id", str(k), "--port", str(args.port + k)] for k in range(args.workers)
    ]
    for k in range(args.workers):
        print(f"worker w{k}: http://{args.host}:{args.port + k}", file=sys.stderr)
    env = {**os.environ, "COWORKENV_ENV_TOKEN": token or ""}
    return run(commands, env=env)


def _validate(doc: Any, bounds: list[Problem], args: argparse.Namespace, out: TextIO) -> int:
    if bounds:
        report = ValidationReport(problems=list(bounds), dynamic=not args.static)
    else:
        report = validate_spec(
            doc, dynamic=not args.static, time_budget=args.time_budget, judge=_judge(args)
        )
    _print_report(report, args, _Safe(out))
    if any(p.code == "simulation_crashed" for p in report.problems):
        return EXIT_INTERNAL
    return EXIT_OK if report.valid else EXIT_INVALID


def _judge(args: argparse.Namespace) -> HttpJudge | None:
    if not args.judge:
        return None
    return HttpJudge(
        args.judge, model=args.judge_model, api_key=os.environ.get("COWORKENV_JUDGE_API_KEY", "")
    )


class _Safe:
    """Writes text that may quote a spec's lone surrogates without failing to encode."""

    def __init__(self, out: TextIO):
        self.out = out

    def write(self, text: str) -> None:
        self.out.write(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _print_report(report: ValidationReport, args: argparse.Namespace, out: TextIO) -> None:
    if args.json:
        json.dump(report.to_dict(), out, indent=2, ensure_ascii=False)
        out.write("\n")
    else:
        status = "VALID" if report.valid else "INVALID"
        out.write(
            f"{args.file}: {status} ({len(report.errors)} errors, "
            f"{len(report.warnings)} warnings)\n"
        )
        for p in report.problems:
            out.write(f"  {p.severity:7} {p.code:28} {p.pointer or '/'}\n")
            out.write(f"          {p.message}\n")
            if p.hint:
                out.write(f"          hint: {p.hint}\n")
        for t in report.tasks:
            if t.oracle_score is None:
                continue
            sens = "n/a" if t.sensitivity is None else f"{t.sensitivity:.2f}"
            out.write(
                f"  task {t.key}: oracle {t.oracle_score:.2f} null {t.null_score:.2f} "
                f"echo {t.echo_score:.2f} sensitivity {sens} "
                f"({t.mutants_caught}/{t.mutants_total} mutants caught)\n"
            )
            if t.adversary_scores:
                scores = ", ".join(f"{n} {v:.2f}" for n, v in t.adversary_scores.items())
                out.write(f"    adversaries: {scores}\n")


def _play(doc: Any, args: argparse.Namespace, out: TextIO) -> int:
    try:
        spec = load_spec(doc)
        policy = policy_by_name(args.policy)
        spec.task(args.task)
    except SpecError as exc:
        print(f"invalid spec: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except (KeyError, ValueError) as exc:
        print(str(exc).strip("'\""), file=sys.stderr)
        return EXIT_USAGE
    result = run_task(spec, args.task, policy, seed=args.seed, faults=not args.no_faults)
    if args.json:
        json.dump(result.to_dict(), out, indent=2, ensure_ascii=False)
        out.write("\n")
        return EXIT_OK
    for m in result.transcript:
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            for tc in m["tool_calls"]:
                out.write(f"[assistant → {tc['function']['name']}] {tc['function']['arguments']}\n")
        elif role == "tool":
            text = message_text(m["content"])[:300]
            images = len(image_urls(m["content"]))
            extra = f" (+{images} image{'s' if images > 1 else ''})" if images else ""
            out.write(f"[tool {m['tool_call_id']}] {text}{extra}\n")
        else:
            out.write(f"[{role}] {m.get('content') or ''}\n")
    g = result.grading
    out.write(
        f"\nscore {g.score:.3f}  passed {g.passed}  strict {g.strict}  completion "
        f"{g.completion:.2f}  safety {g.safety:.0f}  robustness {g.robustness:.2f}  "
        f"stop {result.stop_reason}\n"
    )
    for v in g.verdicts:
        out.write(f"  {v.status:7} {v.category:13} w={v.weight:g}  {v.grader_id}\n")
    return EXIT_OK

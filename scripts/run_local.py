"""Run the web server (uvicorn on the ASGI application), one Celery worker and Celery beat
together until Ctrl-C stops them.

Beat sends the sweepers (work whose worker died, or whose message was lost, is sent again);
its schedule file is ``CELERY_BEAT_SCHEDULE_FILENAME``, under ``var/``.

With ``--seed`` the demo is seeded first. Where to open the app (and, when seeded, how to log
in) is printed last, once the server answers and the worker is ready, so it stays on screen
below their start-up banners.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

HOST = os.environ.get("HOST", "127.0.0.1")
PORT = os.environ.get("PORT", "8000")
READY_TIMEOUT = 90  # seconds to wait for the banners before printing the address anyway
# A line each process prints once it can take work.
READY_MARKERS = {"web": "Uvicorn running on", "worker": " ready.", "beat": "celery beat v"}
LOGIN_PREFIXES = ("URL:", "User:", "Password:")


def web_command(python: str) -> list[str]:
    """The ASGI application under uvicorn, as on a team server: pages, the API and
    ``/envs/<slug>/`` (the environment server, HTTP and WebSocket) on one port."""
    return [
        python,
        "-m",
        "uvicorn",
        "coworkenv_web.asgi:application",
        "--host",
        HOST,
        "--port",
        PORT,
        "--ws-per-message-deflate",
        "false",
    ]


def seed(python: str, url: str) -> list[str]:
    """Seed the demo; print what it did now and return its login lines for the end."""
    result = subprocess.run(
        [python, "manage.py", "seed_demo", "--url", url],
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stderr.write(result.stderr)
    if result.returncode:
        sys.stdout.write(result.stdout)
        raise SystemExit(result.returncode)
    login = []
    for line in result.stdout.splitlines():
        if line.strip().startswith(LOGIN_PREFIXES):
            login.append(line)
        else:
            print(line)
    return login


def forward(name: str, process: subprocess.Popen, ready: threading.Event) -> None:
    """Copy a process's output to ours, line by line, and note when it is ready."""
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if READY_MARKERS[name] in line:
            ready.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", action="store_true", help="Seed the demo project first.")
    args = parser.parse_args()
    python = sys.executable
    url = f"http://{HOST}:{PORT}/"
    login = seed(python, url) if args.seed else []
    commands = {
        "web": web_command(python),
        "worker": [
            python,
            "-m",
            "celery",
            "-A",
            "coworkenv_web",
            "worker",
            "-Q",
            "default,llm,gpu",
            "--concurrency",
            os.environ.get("WORKER_CONCURRENCY", "2"),
            "--loglevel",
            "INFO",
        ],
        "beat": [python, "-m", "celery", "-A", "coworkenv_web", "beat", "--loglevel", "WARNING"],
    }
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes, ready = {}, {}
    for name, command in commands.items():
        processes[name] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        ready[name] = threading.Event()
        threading.Thread(
            target=forward, args=(name, processes[name], ready[name]), daemon=True
        ).start()
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    deadline = time.monotonic() + READY_TIMEOUT
    announced = False
    exit_code = 0
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"The {name} process exited with {process.returncode}; stopping.")
                    exit_code = process.returncode or 1
                    stopping = True
            all_ready = all(event.is_set() for event in ready.values())
            if not stopping and not announced and (all_ready or time.monotonic() > deadline):
                announced = True
                time.sleep(0.3)  # let the last banner lines through first
                lines = [f"CoworkEnv is running at {url}"]
                if not all_ready:
                    waiting = [name for name, event in ready.items() if not event.is_set()]
                    lines.append(f"(still waiting for: {', '.join(waiting)})")
                lines += [line.strip() for line in login if not line.strip().startswith("URL:")]
                lines.append("Ctrl-C stops the web server, the worker and beat.")
                print("\n" + "\n".join(f"  {line}" for line in lines) + "\n", flush=True)
            time.sleep(0.2)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

"""Run the web server and one Celery worker together until Ctrl-C stops both."""

import os
import signal
import subprocess
import sys
import time

HOST = os.environ.get("HOST", "127.0.0.1")
PORT = os.environ.get("PORT", "8000")


def main() -> int:
    python = sys.executable
    commands = {
        "web": [python, "manage.py", "runserver", f"{HOST}:{PORT}"],
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
    }
    processes = {name: subprocess.Popen(cmd) for name, cmd in commands.items()}
    print(
        f"\nCoworkEnv is running at http://{HOST}:{PORT}/"
        " (Ctrl-C stops the web server and the worker)\n"
    )
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"The {name} process exited with {process.returncode}; stopping.")
                    exit_code = process.returncode or 1
                    stopping = True
            time.sleep(0.5)
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

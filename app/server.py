"""Starts the Streamlit server for `forensics app` and `analyze --open`, and stops it with us.

Streamlit always runs headless: its first-run e-mail prompt would go to a stdout nobody reads (the server exits
255 with no message where there is no terminal, and serves nothing in one), and it sends no usage statistics. When
a browser is wanted and a display exists, we open it ourselves once the server listens.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode

from ingest.errors import ForensicsError, MissingDependency

APP_PORT = 8501

# Streamlit's settings for a local, private, prompt-free server.
STREAMLIT_FLAGS = ("--server.address", "localhost", "--server.headless", "true", "--server.showEmailPrompt", "false",
                   "--browser.gatherUsageStats", "false", "--global.developmentMode", "false",
                   "--client.toolbarMode", "minimal")


def free_port(port: int | None) -> int:
    """`port` if given and free (else an error); else the first free port from APP_PORT on."""
    def free(n: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As the server will: a port left in TIME_WAIT by a server just stopped is free; one listened on is not.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", n))
            except OSError:
                return False
            return True

    if port is not None:
        if not free(port):
            raise ForensicsError(f"port {port} is in use; pass another --port")
        return port
    for n in range(APP_PORT, APP_PORT + 50):
        if free(n):
            return n
    raise ForensicsError(f"no free port in {APP_PORT}-{APP_PORT + 49}; pass --port N")


def wait_listening(proc: subprocess.Popen, port: int, wait_s: float = 60.0) -> None:
    """Return once the server accepts connections, so the printed URL works when it is printed."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ForensicsError(f"the app stopped with exit code {proc.returncode} before it served a page "
                                 "(streamlit's message is above)")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    proc.terminate()
    raise ForensicsError(f"the app did not start listening on port {port} within {wait_s:.0f} s")


def has_display(env: Mapping[str, str]) -> bool:
    """Whether a browser window can open here: macOS and Windows always; elsewhere an X11 or Wayland display."""
    return sys.platform in ("darwin", "win32") or bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def streamlit_command(script: Path, port: int, db: Path, run: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port), *STREAMLIT_FLAGS,
           "--", "--db", str(db)]
    return cmd + (["--run", run] if run else [])


def serve_app(db: Path, *, port: int | None = None, run: str | None = None, browser: bool = True,
              say=print) -> int:
    """Run `python -m streamlit run app/streamlit_app.py -- --db DB [--run RUN]` until it stops or Ctrl+C.
    `say` prints our two lines (the URL on stdout; a note on stderr with `err=True`)."""
    missing = [m for m in ("streamlit", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependency(f"the app needs {', '.join(missing)}: pip install -e \".[app]\"")
    script = Path(__file__).resolve().parent / "streamlit_app.py"
    port = free_port(port)
    if not db.exists():
        say(f"forensics: note: no database at {db} yet; the page says so until `forensics analyze RUN_DIR "
            f"--db {db}` creates it", file=sys.stderr)
    env = dict(os.environ)
    root = str(script.parent.parent)  # so the script imports `app` and `ingest` from this same copy
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    url = f"http://localhost:{port}/" + ("?" + urlencode({"run": run, "page": "Run report"}) if run else "")
    # A SIGTERM (a service manager, a test's teardown) must stop the server too, not orphan it.
    previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    # stdin closed: nothing streamlit could ask would be answered.
    proc = subprocess.Popen(streamlit_command(script, port, db, run), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)
    try:
        wait_listening(proc, port)
        say(f"run-forensics app: {url}  (Ctrl+C stops it)", flush=True)
        if browser and has_display(os.environ):
            import webbrowser

            webbrowser.open(url)
        code = proc.wait()
    except KeyboardInterrupt:
        code = 0
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if code not in (0, -15):
        raise ForensicsError(f"the app stopped with exit code {code} (streamlit's message is above)")
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt

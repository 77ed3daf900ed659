"""The local servers the tests and benchmarks start (the dashboard, the LLM server): a free loopback port, a
readiness probe, and stopping the server's process by its id."""

from __future__ import annotations

import http.client
import socket
import subprocess
import urllib.request


def free_port() -> int:
    """A TCP port free on 127.0.0.1 (chosen by the system)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str, timeout: float = 2.0) -> bool:
    """``GET url`` answers 200 within ``timeout`` seconds (``False`` while the server is not up)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (OSError, http.client.HTTPException):
        return False


def stop(process: subprocess.Popen, timeout: float = 10) -> None:
    """Stop a server: terminate it, wait ``timeout`` seconds for it to exit, then kill it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

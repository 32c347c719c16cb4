"""Debian's Chromium for the browser tests (the viewer's, the explorer's): found, or installed with apt-get, or the
test skips saying why."""

import os
import shutil
import subprocess

import pytest

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run", "--disable-dev-shm-usage"]


def chromium_path() -> str:
    """Debian's chromium, installed with apt-get if missing; otherwise skip, saying why."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and cannot be (needs root and apt-get): apt-get install chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(f"chromium could not be installed ({' '.join(cmd)}): {done.stderr.strip()[-300:]}")
    return shutil.which("chromium") or pytest.skip("apt-get installed chromium but it is not on PATH")

"""Headless Debian chromium for the browser tests (the report's and the dashboard's)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_browser() -> None:
    """Skip when chromium and chromedriver are missing; fail under CI=true (.ci/run installs them)."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("CI=true but chromium / chromedriver are missing (.ci/run installs them)")
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    pytest.importorskip("selenium")


def browser():
    """A headless chromium driven by selenium, 1400 x 1000."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))

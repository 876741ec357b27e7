"""A real browser for the dashboard's tests: Debian's chromium driven through its
chromium-driver by selenium (never a downloaded browser).

When chromium or its driver is missing, root on Debian installs the two packages
(`apt-get install chromium chromium-driver`); otherwise the tests skip with the reason,
and under CI=true they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PACKAGES = ("chromium", "chromium-driver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


class BrowserUnavailable(RuntimeError):
    """No chromium could be had or started here; the message says why."""


def browser_unavailable(reason: str) -> None:
    """Skip, or under CI=true fail: the rule of the other real-part fixtures."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs chromium and chromium-driver: {reason}", pytrace=False)
    pytest.skip(f"no browser: {reason}")


def missing() -> list[str]:
    return [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]


def ensure_chromium() -> str | None:
    """None when the browser and its driver are here (installed now if need be), else why not."""
    if not missing():
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"{', '.join(missing())} missing (as root: apt-get install {' '.join(PACKAGES)})"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
    )
    for step in steps:
        done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            return f"{' '.join(step)} failed: {done.stderr.strip()[-500:]}"
    return f"{', '.join(missing())} still missing after apt-get install" if missing() else None


try:
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
except ImportError:  # pragma: no cover - the test extras pin it
    webdriver = None  # type: ignore[assignment]


@contextmanager
def open_chromium(log_dir: Path) -> Iterator[Any]:
    """A fresh headless chromium (an empty profile of its own), quit at the end;
    BrowserUnavailable when it cannot be had (the benchmarks use this one)."""
    if webdriver is None:
        raise BrowserUnavailable("selenium is not installed (pip install -e '.[test]')")
    why = ensure_chromium()
    if why is not None:
        raise BrowserUnavailable(why)
    profile = tempfile.mkdtemp(prefix="shoal-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console: CSP reports
    service = webdriver.ChromeService(
        executable_path=CHROMEDRIVER, log_output=str(log_dir / "chromedriver.log")
    )
    try:
        driver = webdriver.Chrome(options=options, service=service)
    except WebDriverException as exc:
        shutil.rmtree(profile, ignore_errors=True)
        raise BrowserUnavailable(f"chromium did not start: {exc.msg}") from exc
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def chromium(log_dir: Path) -> Iterator[Any]:
    """`open_chromium` for a test: skips (fails under CI=true) when it cannot be had."""
    try:
        opened = open_chromium(log_dir)
        driver = opened.__enter__()
    except BrowserUnavailable as exc:
        browser_unavailable(str(exc))
        raise  # not reached: skip and fail raise
    try:
        yield driver
    finally:
        opened.__exit__(None, None, None)


def login(driver: Any, url: str, token: str, idle: float = 20) -> None:
    """Log in on the dashboard served at `url` through the page's own form; fails when the
    page stops changing for `idle` seconds (stretched by the load) before the list shows."""
    from tests.support.waiting import until

    def page() -> str:
        return str(driver.execute_script("return document.body?.innerText || ''"))

    driver.get(url + "/ui/")
    until(lambda: bool(driver.find_elements("id", "token")), progress=page, what="the login form",
          idle=idle)  # fmt: skip
    driver.find_element("id", "token").send_keys(token)
    driver.find_element("id", "login-submit").click()
    until(lambda: bool(driver.find_elements("id", "clusters")), progress=page,
          what="the clusters list", idle=idle)  # fmt: skip

"""Debian's headless Chromium driven through Debian's chromium-driver (``make browser-tools`` installs both): the
page of runs' browser test and its benchmark open the same browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def missing() -> str | None:
    """Why the browser cannot start here, or None."""
    if Path(CHROMIUM).exists() and Path(DRIVER).exists():
        return None
    return f"{CHROMIUM} and {DRIVER} are missing: `make browser-tools` installs them"


def chromium(width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium (as root: no sandbox), its window ``width`` x ``height``; the caller quits it."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))

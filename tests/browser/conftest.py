"""Browser tests: a live Dynaeval server on 127.0.0.1 (temp data dir, results written
through the store) driven by Debian's headless Chromium through Selenium.

Nothing is downloaded: the browser and its driver are /usr/bin/chromium and
/usr/bin/chromedriver (scripts/setup.sh installs them), and Selenium Manager is disabled.
Without them the tests skip with a reason, or fail where ``DYNAEVAL_REQUIRE_DOCKER=1``
(CI) says the full environment is required.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from api.app import create_app
from tests.browser.seed import seed, seed_single, seed_translation, seed_unmeasured
from usecases.service import Service

CHROMIUM = Path(os.environ.get("DYNAEVAL_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("DYNAEVAL_CHROMEDRIVER", "/usr/bin/chromedriver"))
REPO = Path(__file__).resolve().parents[2]


def _skip_or_fail(reason: str) -> None:
    """Skip locally; fail where the full environment is required (CI sets it)."""
    if os.environ.get("DYNAEVAL_REQUIRE_DOCKER") == "1":
        pytest.fail(f"a headless browser is required here: {reason}")
    pytest.skip(reason)


@dataclass
class Live:
    """The live server: its base URL, its service and the seeded model ids by name."""

    url: str
    service: Service
    ids: dict[str, str]

    def admin_session(self) -> str:
        """A session secret of an admin (model pages are their submitter's, the task
        owner's and the admins')."""
        from store.accounts import ROLE_SCOPES, SESSION, Accounts

        accounts = Accounts(self.service.db, self.service.clock)
        user = accounts.user_by_name("page-admin") or accounts.add_user("page-admin", "admin")
        scopes = sorted(ROLE_SCOPES["admin"])
        return accounts.create_token(user["id"], "browser", scopes, kind=SESSION).secret

    def sign_in(self, driver: Any) -> None:
        """Give ``driver`` an admin's session cookie on this server."""
        driver.get(self.url + "/static/pages/pages.css")
        driver.add_cookie({"name": "dynaeval_session", "value": self.admin_session(), "path": "/"})

    def sign_out(self, driver: Any) -> None:
        driver.delete_all_cookies()

    def api(self, path: str, **params: Any) -> Any:
        response = requests.get(self.url + path, params=params, timeout=30)
        response.raise_for_status()
        return response.json()


@contextmanager
def serving(service: Service, ids: dict[str, str]) -> Iterator[Live]:
    """``service``'s app on a free loopback port in a thread; the service is closed after."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, create_app(service), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Live(f"http://127.0.0.1:{server.server_port}", service, ids)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        service.close()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server on a free loopback port, seeded with scored models (no containers)."""
    service = Service.open(tmp_path_factory.mktemp("browser") / "data")
    ids = seed(service)
    ids["single"] = seed_single(service)
    for i, model_id in enumerate(seed_unmeasured(service)):
        ids[f"vqa-{i}"] = model_id
    for i, model_id in enumerate(seed_translation(service)):
        ids[f"mt-{i}"] = model_id
    with serving(service, ids) as running:
        yield running


def _no_selenium_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Selenium Manager downloads browsers and drivers: make any call to it an error."""
    from selenium.webdriver.common import selenium_manager

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("Selenium Manager must not run (it may download a browser)")

    monkeypatch.setattr(selenium_manager.SeleniumManager, "binary_paths", refuse)


def _driver(javascript: bool = True) -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service as DriverService
    except ImportError as exc:
        _skip_or_fail(f"selenium is not installed ({exc}); pip install -e '.[test]'")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (path.exists() and os.access(path, os.X_OK)):
            _skip_or_fail(
                f"{path} is missing: scripts/setup.sh installs chromium and chromium-driver"
            )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root in containers
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(flag)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    driver = webdriver.Chrome(
        options=options, service=DriverService(executable_path=str(CHROMEDRIVER))
    )
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium with JavaScript."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _no_selenium_manager(monkeypatch)
        driver = _driver()
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def browser_without_js() -> Iterator[Any]:
    """Headless Chromium with JavaScript turned off (the server-rendered page only)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _no_selenium_manager(monkeypatch)
        driver = _driver(javascript=False)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: ``$DYNAEVAL_ARTIFACTS`` or ``test-artifacts/`` (git-ignored by
    its own ``.gitignore``)."""
    root = Path(os.environ.get("DYNAEVAL_ARTIFACTS") or REPO / "test-artifacts")
    target = root / "browser"
    target.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("DYNAEVAL_ARTIFACTS"):
        (root / ".gitignore").write_text("*\n", encoding="utf-8")
    return target

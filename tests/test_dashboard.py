"""`mcgs dashboard` (issue 38): a web page served from a run's storage alone that follows the run
live; tested in a real headless browser (Debian's chromium + chromium-driver) while a search adds
a node, and through its JSON routes (token, unchanged state)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from browser import browser, require_browser

from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings

CODER = ("model.logistic_regression", "model.knn")


@pytest.fixture()
def small_run(tmp_path):
    task = build_demo_task(tmp_path / "task")
    settings = SearchSettings(time_budget_s=300, max_nodes=2, num_drafts=2, plan_candidates=0, node_timeout_share=1.0, coder="recipe",
                              ensemble=False, cpu_threads=1)
    search = create_search(task, tmp_path / "run", settings=settings, coder=RecipeCoder(models=CODER))
    search.run()
    search.storage.close()
    return tmp_path / "run"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """The dashboard served by uvicorn in a thread of the test."""

    def __init__(self, app):
        import uvicorn

        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.1)
        return f"http://127.0.0.1:{self.port}/"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def test_the_api_answers_from_storage_and_a_token_guards_it(small_run):
    from starlette.testclient import TestClient

    from mcgs.dashboard import create_app

    before = sorted(p.stat().st_mtime_ns for p in small_run.rglob("*") if p.is_file())
    client = TestClient(create_app(small_run))
    state = client.get("/api/state").json()
    assert state["facts"]["status"] == "finished" and len(state["rows"]) == 2 and state["graph"]["data"]
    assert client.get("/api/state", params={"version": state["version"]}).json() == {"version": state["version"]}  # nothing changed
    node = client.get("/api/node/1").json()
    assert node["code"] and node["knowledge"] and node["plan"] and client.get("/api/node/99").status_code == 404
    assert sorted(p.stat().st_mtime_ns for p in small_run.rglob("*") if p.is_file()) == before  # it changed nothing
    guarded = TestClient(create_app(small_run, token="s3cret"))
    assert guarded.get("/api/state").status_code == 403 and guarded.get("/", params={"token": "wrong"}).status_code == 403
    assert guarded.get("/", params={"token": "wröng"}).status_code == 403
    assert guarded.get("/", params={"token": "s3cret"}).status_code == 200
    assert guarded.get("/api/state").status_code == 200  # the cookie the first answer set


@pytest.mark.slow
def test_the_page_shows_a_new_node_without_a_reload_and_a_click_shows_its_code_and_diff(small_run):
    require_browser()
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from mcgs.dashboard import create_app

    rows = "#node-table tbody tr.node-row"
    with _Server(create_app(small_run)) as url:
        driver = browser()
        try:
            driver.get(url)
            WebDriverWait(driver, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 2)
            driver.execute_script("window.__same_page = true;")
            search = open_search(small_run, coder=RecipeCoder(models=CODER), time_budget_s=300)
            search.settings = search.settings.model_copy(update={"max_nodes": 3})
            worker = threading.Thread(target=search.run)
            worker.start()
            worker.join(300)
            new = max(n.seq for n in search.nodes())
            # the page asks every 2 s; waited for generously (the latency is measured in experiments/dashboard_scale.py)
            WebDriverWait(driver, 120).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 3)
            assert driver.execute_script("return window.__same_page === true;")  # no reload
            points = driver.execute_script("const g = document.getElementById('graph'); return g.data.reduce((a, t) => a + (t.customdata || []).length, 0);")
            assert points == 4  # the root and three nodes
            # the run's end (its status, the final choice) is one more version: the table may be redrawn
            # under the click, as a user's row is, so a click on a replaced row is made again
            WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
                lambda d: d.find_element(By.CSS_SELECTOR, f'#node-table tr[data-seq="{new}"]').click() is None)
            WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "node-panel").get_attribute("data-seq") == str(new))
            panel = driver.find_element(By.ID, "node-panel")
            node = next(n for n in search.nodes() if n.seq == new)
            assert panel.find_element(By.CSS_SELECTOR, "pre.code").text.strip().splitlines()[0] == node.code.strip().splitlines()[0]
            assert "Diff to its parent" in panel.text and panel.find_elements(By.CSS_SELECTOR, "pre.diff")
        finally:
            driver.quit()


@pytest.mark.slow
def test_the_node_table_draws_a_window_of_rows_newest_or_best_first_and_more_on_request(small_run, monkeypatch):
    """A run of thousands of nodes would cost the tab hundreds of MiB as one table (measured in
    experiments/dashboard_scale.py), so the table draws PAGE_ROWS rows at a time; 1 here."""
    require_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    from starlette.testclient import TestClient

    import mcgs.dashboard
    from mcgs.dashboard import create_app

    monkeypatch.setattr(mcgs.dashboard, "PAGE_ROWS", 1)
    app = create_app(small_run)

    state = TestClient(app).get("/api/state").json()["rows"]
    newest = max(r["seq"] for r in state)
    best = max(state, key=lambda r: r["score"])["seq"]
    shown = lambda d: [int(tr.get_attribute("data-seq")) for tr in d.find_elements(By.CSS_SELECTOR, "#node-table tbody tr.node-row")]
    with _Server(app) as url:
        driver = browser()
        try:
            driver.get(url)
            WebDriverWait(driver, 60).until(lambda d: shown(d) == [newest])
            assert driver.find_element(By.ID, "row-count").text == "showing 1 of 2 nodes"
            Select(driver.find_element(By.ID, "row-order")).select_by_value("oldest")
            WebDriverWait(driver, 10).until(lambda d: shown(d) == [min(r["seq"] for r in state)])
            Select(driver.find_element(By.ID, "row-order")).select_by_value("best")
            WebDriverWait(driver, 10).until(lambda d: shown(d) == [best])
            driver.find_element(By.ID, "more-rows").click()
            WebDriverWait(driver, 10).until(lambda d: len(shown(d)) == 2)
            assert shown(driver)[0] == best and not driver.find_element(By.ID, "more-rows").is_displayed()
        finally:
            driver.quit()

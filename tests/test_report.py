"""`mcgs report` (issue 9): one self-contained HTML file from storage alone; rendered in a real
headless browser (Debian's chromium + chromium-driver, installed by .ci/run), where clicking a
node of the graph shows its program."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from mcgs.cli import app
from browser import browser, require_browser
from mcgs.coders.recipe import RecipeCoder
from mcgs.demo import build_demo_task
from mcgs.search import create_search, open_search
from mcgs.settings import SearchSettings


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    task = build_demo_task(base / "task")
    settings = SearchSettings(time_budget_s=240, max_nodes=4, num_drafts=2, plan_candidates=0, node_timeout_share=1.0, coder="recipe")
    search = create_search(task, base / "run", settings=settings, coder=RecipeCoder(models=("model.logistic_regression", "model.knn")))
    search.run()
    search.storage.close()
    return base / "run"


def test_the_report_is_one_self_contained_file_drawn_from_storage(finished_run, tmp_path):
    res = CliRunner().invoke(app, ["report", str(finished_run), "-o", str(tmp_path / "r.html")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = (tmp_path / "r.html").read_text()
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"?http", text)  # nothing fetched from a network
    assert "Plotly" in text and 'id="graph"' in text and 'id="progress"' in text
    search = open_search(finished_run)
    nodes = [n for n in search.nodes() if n.parent_id is not None]
    assert len(re.findall(r'<tr class="node-row"', text)) == len(nodes)
    for n in nodes:
        assert f'data-seq="{n.seq}"' in text
    improve = next(n for n in nodes if n.operator.value == "improve")
    assert "Diff to its parent" in text and f"node {improve.seq}" in text


@pytest.mark.slow
def test_the_report_renders_in_a_browser_and_a_click_on_a_node_shows_its_code(finished_run, tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from mcgs.report import write_report

    search = open_search(finished_run)
    path = write_report(search, tmp_path / "report.html")
    valid = next(n for n in search.nodes() if n.is_valid and n.operator.value == "draft")
    driver = browser()
    try:
        driver.get(path.as_uri())
        wait = WebDriverWait(driver, 30)
        points = wait.until(ec.presence_of_all_elements_located((By.CSS_SELECTOR, "#graph .scatterlayer .trace .points path.point")))
        assert len(points) == len(search.nodes())  # every node drawn, the root included
        assert driver.find_elements(By.CSS_SELECTOR, "#progress .scatterlayer .trace")  # the best-so-far curve
        # click the graph point of a valid draft: plotly's hover/click layer sits over the points,
        # so click at the point's position on the page
        idx = driver.execute_script(
            "const g = document.getElementById('graph'); for (let t = 0; t < g.data.length; t++) {"
            " const cd = g.data[t].customdata || []; const i = cd.indexOf(arguments[0]); if (i >= 0) return [t, i]; } return null;",
            valid.seq,
        )
        assert idx is not None
        from selenium.webdriver.common.action_chains import ActionChains

        def click_shows_the_node(d):
            # the page resizes the graph once after drawing it (Plotly.Plots.resize, asynchronous), so
            # a point found before that moves: find it again and click until the panel shows the node
            trace_el = d.find_elements(By.CSS_SELECTOR, "#graph .scatterlayer .trace")[idx[0]]
            ActionChains(d).move_to_element(trace_el.find_elements(By.CSS_SELECTOR, "path.point")[idx[1]]).click().perform()
            return d.find_element(By.ID, "node-panel").get_attribute("data-seq") == str(valid.seq)

        WebDriverWait(driver, 30, poll_frequency=1.0).until(click_shows_the_node)
        panel = driver.find_element(By.ID, "node-panel")
        code = panel.find_element(By.CSS_SELECTOR, "pre.code").text
        assert code.strip().splitlines()[0] == valid.code.strip().splitlines()[0]
        assert "working/oof.csv" in code or "OOF" in code or "oof" in code
        # a row of the table opens the same panel
        other = next(n for n in search.nodes() if n.parent_id is not None and n.seq != valid.seq)
        driver.find_element(By.CSS_SELECTOR, f'#node-table tr[data-seq="{other.seq}"]').click()
        wait.until(lambda d: d.find_element(By.ID, "node-panel").get_attribute("data-seq") == str(other.seq))
    finally:
        driver.quit()


def test_a_large_run_embeds_programs_only_for_the_nodes_a_reader_looks_at(finished_run, tmp_path, monkeypatch):
    """Past FULL_DETAIL_NODES nodes the report embeds program, diff and logs for the best nodes,
    the chosen node's lineage and the newest ones; the others keep their error and read the rest
    from their table row, with a link to their folder (a 5 000-node report was 130 MiB with every
    program, under 10 MiB so: experiments/report_scale.py)."""
    import json

    import mcgs.report as report

    search = open_search(finished_run, read_only=True)
    nodes = search.nodes()
    monkeypatch.setattr(report, "FULL_DETAIL_NODES", 2)
    monkeypatch.setattr(report, "FULL_DETAIL_TOP", 1)
    monkeypatch.setattr(report, "FULL_DETAIL_NEWEST", 1)
    path = report.write_report(search, tmp_path / "report.html")
    html = path.read_text()
    details = json.loads(re.search(r'<script id="node-details" type="application/json">(.*?)</script>', html, re.S).group(1).replace("<\\/", "</"))
    by_id = {n.id: n for n in nodes}
    keep = {search.final_node.seq, search.best_node.seq, max(n.seq for n in nodes)}
    for n in list(keep):
        cur = next(x for x in nodes if x.seq == n)
        while cur is not None:  # the lineage, and for an ensemble its members'
            keep.add(cur.seq)
            cur = by_id.get(cur.parent_id)
    brief = {int(s) for s, d in details.items() if d.get("brief")}
    assert brief and not brief & keep
    assert all("code" not in details[str(s)] and "stdout" not in details[str(s)] for s in brief)
    by_seq = {n.seq: n for n in nodes}
    assert all(details[str(s)]["code"] == by_seq[s].code for s in keep)
    # in a browser, a brief node's row opens a panel with its facts and a link to its program
    require_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    node = by_seq[min(brief)]
    driver = browser()
    try:
        driver.get(path.as_uri())
        driver.find_element(By.CSS_SELECTOR, f'#node-table tr[data-seq="{node.seq}"]').click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "node-panel").get_attribute("data-seq") == str(node.seq))
        panel = driver.find_element(By.ID, "node-panel")
        assert f"node {node.seq} · {node.operator.value} · {node.state.value}" in panel.find_element(By.TAG_NAME, "h2").text
        assert not panel.find_elements(By.CSS_SELECTOR, "pre.code")
        link = panel.find_element(By.CSS_SELECTOR, "p.brief a").get_attribute("href")
        assert link.endswith(f"/run/nodes/{node.seq:05d}/solution.py"), link
        assert (node.plan or "")[:40] in panel.text
    finally:
        driver.quit()

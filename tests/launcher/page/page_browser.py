"""Loads the job's page in headless Chromium (Debian's chromium and chromium-driver, through
selenium) and prints what its rendered DOM shows, as one JSON object on stdout: run as a script so
that a test can run it inside a network namespace (`ip netns exec NS python page_browser.py ...`),
where the page's launcher is.

    page_browser.py URL --until JS [--stack RANK] [--screenshot PNG] [--timeout S]

--until: a JavaScript expression; the page is read once it is true (or at --timeout: "timed_out").
--stack: then press rank RANK's stack button and wait for its text.
"""
import argparse
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

READ = """
const text = (id) => { const e = document.getElementById(id); return e && !e.hidden ? e.textContent : null; };
const rows = [...document.querySelectorAll('#ranks tbody tr')].map(tr => ({
  rank: Number(tr.dataset.rank), straggler: tr.classList.contains('straggler'),
  cells: [...tr.cells].map(td => td.textContent)}));
const lines = [...document.querySelectorAll('#chart polyline')].map(l => ({
  rank: Number(l.dataset.rank), straggler: l.classList.contains('straggler')}));
const link = document.getElementById('node0-link');
const content = document.getElementById('content');  // none: not the page (a 401's text)
const chart = document.getElementById('chart');
return {title: document.title, page: !!content, content: !!content && !content.hidden,
        access: text('access'), gone: text('gone'), hang: text('hang'), job: text('job'),
        ranks: rows, chart_lines: lines, chart_text: chart ? chart.textContent : null,
        hang_state: (document.getElementById('hang') || {dataset: {}}).dataset.state || null, node0: text('node0'), node0_link: link ? link.getAttribute('href') : null,
        stack: text('stack-text'), body: document.body.innerText};
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--until", default="true")
    ap.add_argument("--stack", type=int)
    ap.add_argument("--screenshot")
    ap.add_argument("--timeout", type=float, default=20)
    a = ap.parse_args()
    opts = Options()
    opts.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,1300"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    out = {"timed_out": False}
    try:
        driver.set_page_load_timeout(a.timeout)
        driver.get(a.url)
        try:
            WebDriverWait(driver, a.timeout, poll_frequency=0.2).until(lambda d: d.execute_script(f"return !!({a.until});"))
        except Exception:  # read what is there: the caller's assertions say what is missing
            out["timed_out"] = True
        if a.stack is not None and not out["timed_out"]:
            driver.execute_script(f"document.querySelector('#ranks tr[data-rank=\"{a.stack}\"] button').click();")
            try:
                WebDriverWait(driver, 45, poll_frequency=0.2).until(
                    lambda d: d.execute_script("return document.getElementById('stack-text').dataset.done === '1';"))
            except Exception:
                out["stack_timed_out"] = True
        out.update(driver.execute_script(READ))
        if a.screenshot:
            driver.save_screenshot(a.screenshot)
    finally:
        driver.quit()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

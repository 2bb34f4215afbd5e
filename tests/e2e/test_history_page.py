"""The history page (autosync-web, `dvcs-autosync open`) in a real browser: Debian's
headless Chromium driven through chromedriver (selenium), against the real suite on
real git clones. As a user sees it (restore, settle, bring back, pause and resume), and
as an attacker does (no secret, another site, another Host, another local user, a
hostile file name).

AUTOSYNC_SCREENSHOTS=FOLDER keeps the page's picture there (docs/history-page.png is one).
"""
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from autosync.core.messages import printable
from autosync.core.paths import folder_id
from base import tree, wait_until
from helpers import committed, cut_off, reconnect, settle, share, sync_both, write

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.expected_conditions import staleness_of  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
pytestmark = pytest.mark.skipif(not os.path.exists(DRIVER),
                                reason="chromium-driver is not installed (tests/install.sh)")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, with a profile of its own."""
    profile = tempfile.mkdtemp(prefix="autosync-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1200,1000",
                 "--user-data-dir=" + profile):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


class Page:
    """The page server of one test's HOME: started by `dvcs-autosync open`, whose
    browser ($BROWSER) is a script that writes down the address it is given."""

    def __init__(self, machine, tmp_path):
        self.opener = tmp_path / "browser.sh"
        self.opener.write_text('#!/bin/sh\nprintf "%s" "$1" > "$0.url"\n')
        self.opener.chmod(self.opener.stat().st_mode | stat.S_IXUSR)
        self.config = machine.config

    def open(self):
        """Run `dvcs-autosync open` -> the address it gave the browser."""
        done = subprocess.run([sys.executable, "-m", "autosync.supervisor", "open",
                               "--config", self.config], env=dict(os.environ,
                                                                   BROWSER=str(self.opener)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert done.returncode == 0, done.stderr
        assert "open in your browser" in done.stdout
        return open(str(self.opener) + ".url").read()

    def address(self):
        from autosync.core import webpage
        return webpage.read_address()

    def stop(self):
        found = self.address()
        if found:
            os.kill(found["pid"], 15)


@pytest.fixture
def page(tmp_path):
    made = []

    def make(machine):
        made.append(Page(machine, tmp_path))
        return made[-1]
    yield make
    for p in made:
        p.stop()


def wait_for(driver, css, timeout=30):
    try:
        return WebDriverWait(driver, timeout).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, css) or False)[0]
    except TimeoutException:
        raise AssertionError("no %s within %g s at %s: %s" % (
            css, timeout, driver.current_url, driver.find_element(By.TAG_NAME, "body").text[:3000]))


def click_and_wait_said(driver, button):
    """Click a button that runs an action; -> the words the page says afterwards (on the
    page the action goes back to: the one clicked on is gone first)."""
    old = driver.find_element(By.TAG_NAME, "html")
    button.click()
    WebDriverWait(driver, 120).until(staleness_of(old))
    return wait_for(driver, "#said", 120).text


def row_with(driver, css, text):
    for row in driver.find_elements(By.CSS_SELECTOR, css):
        if text in row.text:
            return row
    raise AssertionError("no %s row with %r in %s" % (css, text, driver.current_url))


def screenshot(driver, tmp_path, name):
    path = str(tmp_path / name)
    driver.save_screenshot(path)
    keep = os.environ.get("AUTOSYNC_SCREENSHOTS")
    if keep:
        shutil.copy(path, os.path.join(keep, name))


@pytest.mark.e2e
def test_a_user_restores_settles_brings_back_and_pauses(machines, remote, browser, page,
                                                       tmp_path):
    a = machines("laptop", hostname="laptop")
    b = machines("desktop", hostname="desktop")
    write(a, "notes.txt", b"first line\nsecond line\n")
    settle(a, remote)
    write(a, "notes.txt", b"first line\nsecond line, changed\n")
    write(a, "old recipe.txt", b"flour, water, salt\n")
    write(a, "plan.md", b"v1\n")
    write(a, "list.txt", b"v1\n")
    share(a, b, remote)
    os.unlink(os.path.join(a.path, "old recipe.txt"))
    settle(a, remote)
    url = cut_off(b)  # the same file changed on both while apart: a conflict
    write(a, "plan.md", b"laptop's plan\n")
    write(a, "list.txt", b"laptop's list\n")
    settle(a, remote)
    write(b, "plan.md", b"desktop's plan\n")
    write(b, "list.txt", b"desktop's list\n")
    committed(b)
    reconnect(b, url)
    sync_both(a, b, remote)
    [list_copy, copy] = sorted(p for p in tree(a) if "(conflict from " in p)

    browser.get(page(a).open())
    status = wait_for(browser, ".status")
    assert "in sync" in status.text and "ok" in status.get_attribute("class").split()
    assert "?ticket=" not in browser.current_url  # the ticket is dropped by a redirect
    browser.find_element(By.LINK_TEXT, a.path).click()
    wait_for(browser, "#timeline")
    assert "laptop" in browser.find_element(By.CSS_SELECTOR, ".machines").text
    screenshot(browser, tmp_path, "history-page.png")

    # A conflict settled: the copy's version kept at the file.
    kept = tree(a)[copy]
    said = click_and_wait_said(browser, row_with(browser, "tr.conflict", "plan.md")
                               .find_element(By.XPATH, ".//button[.=\"Keep the copy's version\"]"))
    assert "committed" in said
    assert a.read("plan.md") == kept and a.read(copy) is None
    # The other one: both kept, the copy under an ordinary name.
    before = tree(a)
    said = click_and_wait_said(browser, row_with(browser, "tr.conflict", "list.txt")
                               .find_element(By.XPATH, ".//button[.='Keep both']"))
    assert said.startswith("kept both")
    [both] = [p for p in tree(a) if p.startswith("list (from ")]
    assert a.read(both) == before[list_copy] and a.read("list.txt") == before["list.txt"]
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.conflict")

    # A removed file brought back.
    said = click_and_wait_said(browser, row_with(browser, "tr.gone", "old recipe.txt")
                               .find_element(By.TAG_NAME, "button"))
    assert "brought back old recipe.txt" in said
    assert a.read("old recipe.txt") == b"flour, water, salt\n"

    # One file's versions: the preview, the difference, an older version restored.
    browser.find_element(By.LINK_TEXT, "notes.txt").click()
    versions = wait_for(browser, "table.versions")
    assert len(versions.find_elements(By.CSS_SELECTOR, "tr.version")) == 2
    assert "second line, changed" in browser.find_element(By.CSS_SELECTOR, "#preview").text
    old = browser.find_element(By.TAG_NAME, "html")  # the slider, to the oldest version
    browser.execute_script("var s = document.getElementById('slider'); s.value = 0; "
                           "s.dispatchEvent(new Event('change'));")
    WebDriverWait(browser, 30).until(staleness_of(old))
    assert "second line\n" in wait_for(browser, "#preview").text + "\n"
    assert "changed" not in browser.find_element(By.CSS_SELECTOR, "#preview").text
    browser.find_element(By.XPATH, "//button[.='Compare the two versions']").click()
    diff = wait_for(browser, "pre.diff")
    assert [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.del")] == \
        ["-second line"]
    assert [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.add")] == \
        ["+second line, changed"]
    said = click_and_wait_said(browser, browser.find_element(By.CSS_SELECTOR, "button.restore"))
    assert "notes.txt is as it was at" in said
    assert a.read("notes.txt") == b"first line\nsecond line\n"
    settle(a, remote)
    assert remote.files()[b"notes.txt"] == b"first line\nsecond line\n"
    assert "restore of notes.txt" in remote.log("-1", "--format=%B")

    # Pause and resume, and the status follows.
    browser.find_element(By.PARTIAL_LINK_TEXT, a.path).click()
    said = click_and_wait_said(browser, wait_for(browser, "form.pause button"))
    assert said.startswith("paused")
    assert a.status().get("paused")
    box = browser.find_element(By.CSS_SELECTOR, ".status")
    assert "paused" in box.get_attribute("class").split() and "paused" in box.text
    # While paused, nothing can be committed first: a restore is refused, in words.
    write(a, "notes.txt", b"typed while paused\n")
    browser.find_element(By.LINK_TEXT, "notes.txt").click()
    said = click_and_wait_said(browser, wait_for(browser, "button.restore"))
    assert "nothing was restored" in said and "resume" in said
    assert a.read("notes.txt") == b"typed while paused\n"
    browser.find_element(By.PARTIAL_LINK_TEXT, a.path).click()
    said = click_and_wait_said(browser, browser.find_element(By.CSS_SELECTOR, "form.pause button"))
    assert said.startswith("resumed")
    assert not a.status().get("paused")


HOSTILE = ["<script>document.title='pwned'</script>.txt",
           "<img src=x onerror=\"document.title='pwned'\">.txt",
           "quote\"s and 'single'.txt", "new\nline.txt", "bell\x07 and \x1b[31mred.txt"]


class Attacker(BaseHTTPRequestHandler):
    """Another site (another port of 127.0.0.1): a page whose form posts to the page."""
    target = None

    def do_GET(self):
        body = ("<!doctype html><form method=post action='http://%s/pause'>"
                "<input name=csrf value=guess><input name=f value=x></form>"
                "<script>document.forms[0].submit()</script>" % self.target).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def png():
    """A 1x1 PNG image."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) \
        + chunk(b"IDAT", zlib.compress(b"\0\xff\x80\x00")) + chunk(b"IEND", b"")


def get(url, headers=()):
    """-> (HTTP status, body) of a GET without the browser."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers)),
                                    timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.mark.e2e
def test_hostile_names_and_strangers_get_nothing(machines, remote, browser, page, nobody):
    a = machines("a", hostname="laptop")
    for i, name in enumerate(HOSTILE):
        write(a, name, b"content %d\n" % i)
    write(a, "dot.png", png())
    settle(a, remote)
    served = page(a)
    ticket_url = served.open()
    browser.get(ticket_url)
    wait_for(browser, ".status")
    browser.find_element(By.LINK_TEXT, a.path).click()
    timeline = wait_for(browser, "#timeline")
    links = [e.text for e in timeline.find_elements(By.CSS_SELECTOR, "ul.files a")]
    for name in HOSTILE:  # each name as `dvcs-autosync log` shows it, as text
        assert printable(name) in links
    assert browser.title == a.path + " - dvcs-autosync"  # no script set it
    assert not browser.find_elements(By.CSS_SELECTOR, "main img")
    browser.find_element(By.LINK_TEXT, printable(HOSTILE[0])).click()
    assert wait_for(browser, "h1.name").text == printable(HOSTILE[0])
    assert "content 0" in browser.find_element(By.CSS_SELECTOR, "#preview").text
    assert browser.title == printable(HOSTILE[0]) + " - dvcs-autosync"

    # An image's version is shown as an image, from the page itself.
    browser.back()
    browser.find_element(By.LINK_TEXT, "dot.png").click()
    image = wait_for(browser, "#preview img")
    wait_until(lambda: browser.execute_script("return arguments[0].complete && "
                                              "arguments[0].naturalWidth", image) == 1, 30,
               what="the preview image to load")

    found = served.address()
    port = found["port"]
    base = "http://127.0.0.1:%d" % port
    # Without the secret, with a used ticket, or at another name (DNS rebinding): nothing.
    assert get(base + "/")[0] == 403
    assert get(ticket_url)[0] == 403
    cookie = ("Cookie", "autosync_page=" + found["secret"])
    assert get(base + "/", [cookie])[0] == 200
    assert get(base + "/", [cookie, ("Host", "rebound.example:%d" % port)])[0] == 421

    # Another site in the same browser: its form's post is refused, nothing paused.
    Attacker.target = "127.0.0.1:%d" % port
    other = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    browser.get("http://127.0.0.1:%d/" % other.server_address[1])
    wait_until(lambda: "Refused" in browser.page_source, 30, what="the page's refusal")
    assert "another site" in browser.find_element(By.TAG_NAME, "body").text
    other.shutdown()
    other.server_close()
    assert not a.status().get("paused")

    # Another local user, even one who has the secret, is not answered at all.
    script = ("import urllib.request, sys\n"
              "r = urllib.request.Request(sys.argv[1], headers={'Cookie': sys.argv[2]})\n"
              "try:\n    print(urllib.request.urlopen(r, timeout=30).status)\n"
              "except Exception as e:\n    print('refused:', type(e).__name__)\n")
    done = subprocess.run(nobody.as_user(["/usr/bin/python3", "-c", script, base + "/",
                                          cookie[1]]), stdout=subprocess.PIPE, text=True)
    assert done.stdout.startswith("refused:"), done.stdout
    # A page left open follows the daemon: gone, then back.
    browser.get(base + "/")
    box = wait_for(browser, ".status")
    a.stop()
    wait_until(lambda: "off" in box.get_attribute("class").split(), 30,
               what="the page to see the daemon gone")
    assert "not running" in box.text
    a.start()
    wait_until(lambda: "ok" in box.get_attribute("class").split(), 30,
               what="the page to see the daemon back")
    # (and the page's own status answer, for one who may ask)
    assert json.loads(get(base + "/status.json?f=" + folder_id(a.path), [cookie])[1])[
        "colour"] == "ok"

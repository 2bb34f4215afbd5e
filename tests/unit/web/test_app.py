"""web/app.py: who the history page answers, and what it refuses, called as WSGI is
(no server, no browser: tests/e2e/test_history_page.py has those)."""
import io
import os

import pytest

from autosync.core import webpage
from autosync.web import app as page

PORT, SECRET = 8123, "s3cret-of-the-test"
HOST = "127.0.0.1:%d" % PORT
COOKIE = "autosync_page=" + SECRET


@pytest.fixture
def web():
    return page.App(PORT, SECRET, [])


def call(web, path="/", method="GET", query="", headers=None, body=b""):
    """-> (status code, {header: value}, body) of one request."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_HOST": HOST, "CONTENT_LENGTH": str(len(body)),
               "wsgi.input": io.BytesIO(body)}
    for name, value in (headers or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    said = {}

    def start(status, header_list):
        said["status"], said["headers"] = int(status.split()[0]), dict(header_list)
    out = b"".join(web(environ, start))
    return said["status"], said["headers"], out.decode("utf-8")


def test_without_the_secret_nothing_is_answered(web):
    for path in ("/", "/folder", "/file", "/raw", "/status.json", "/static/page.js"):
        status, _, body = call(web, path, query="f=x")
        assert status == 403 and "dvcs-autosync open" in body
    assert call(web, "/", headers={"HTTP_COOKIE": "autosync_page=guess"})[0] == 403


def test_another_host_name_is_refused_even_with_the_secret(web):
    for host in ("evil.example:%d" % PORT, "127.0.0.1:1", "127.0.0.1", "", None):
        status, _, _ = call(web, headers={"HTTP_HOST": host, "HTTP_COOKIE": COOKIE})
        assert status == 421, host
    assert call(web, headers={"HTTP_HOST": "localhost:%d" % PORT, "HTTP_COOKIE": COOKIE})[0] \
        == 200


def test_a_ticket_sets_the_cookie_once(web):
    ticket = webpage.ticket(SECRET)
    status, headers, _ = call(web, query="ticket=" + ticket)
    assert status == 303 and headers["Location"] == "/"
    assert headers["Set-Cookie"] == COOKIE + "; Path=/; HttpOnly; SameSite=Strict"
    assert call(web, query="ticket=" + ticket)[0] == 403  # used
    assert call(web, query="ticket=" + webpage.ticket("another secret"))[0] == 403
    late = webpage.ticket(SECRET, now=0)
    assert call(web, query="ticket=" + late)[0] == 403
    assert call(web, query="ticket=nonsense")[0] == 403


def test_every_answer_forbids_other_sites_and_inline_scripts(web):
    status, headers, body = call(web, headers={"HTTP_COOKIE": COOKIE})
    assert status == 200
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe" not in csp and "frame-ancestors 'none'" in csp
    assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
    assert "<script>" not in body and 'src="http' not in body and 'href="http' not in body
    assert call(web, "/", "PUT", headers={"HTTP_COOKIE": COOKIE})[0] == 405


def test_a_change_needs_the_page_s_origin_and_token(web):
    good = "csrf=%s&f=none" % web.csrf
    origin = "http://" + HOST
    for headers, body in (({"HTTP_ORIGIN": origin}, "csrf=guess&f=none"),
                          ({"HTTP_ORIGIN": origin}, "f=none"),
                          ({"HTTP_ORIGIN": "http://127.0.0.1:9999"}, good),
                          ({"HTTP_ORIGIN": "null"}, good),
                          ({}, good),
                          ({"HTTP_ORIGIN": origin, "HTTP_SEC_FETCH_SITE": "same-site"}, good)):
        status, _, _ = call(web, "/pause", "POST", body=body.encode(),
                            headers=dict(headers, HTTP_COOKIE=COOKIE))
        assert status == 403, headers
    # The page's own form gets through the checks (to a folder that is not there).
    status, _, body = call(web, "/pause", "POST", body=good.encode(),
                           headers={"HTTP_ORIGIN": origin, "HTTP_COOKIE": COOKIE})
    assert status == 404 and "no synced folder" in body
    assert call(web, "/pause", "GET", headers={"HTTP_COOKIE": COOKIE})[0] == 404


@pytest.mark.parametrize("rel", ["../outside", "/etc/passwd", "a/../../b", "a//b", ".", ""])
def test_a_path_that_leads_out_is_refused(rel):
    with pytest.raises(page.Denied):
        page.relative(rel)


def test_any_name_survives_the_address():
    for name in ("<script>x</script>", "quote\"s 'x'", "new\nline", "a&b=c+d%20",
                 os.fsdecode(b"bad\xffname"), "\x1b[31m"):
        assert page.unquote(page.quote(name)) == name
        assert page.parse_pairs("path=" + page.quote(name))["path"] == name


def test_an_action_goes_back_only_to_a_page_of_ours(web):
    for back, where in (("/file?f=x&path=a%20b", "/file?f=x&path=a%20b&said="),
                        ("/", "/?said="), ("//evil.example/", "/?said="),
                        ("/\t/evil.example", "/?said="), ("http://evil.example/", "/?said=")):
        status, headers, _ = web.done({"back": back}, True, "done")
        assert status == 303 and headers[0][1].startswith(where), back

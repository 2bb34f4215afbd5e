"""The history page as a WSGI application: who may ask, what is answered.

Every request is checked before anything is read (docs/history-page.md, "Security"):
  * the Host header is 127.0.0.1:PORT or localhost:PORT (a DNS-rebinding site that
    points its own name at 127.0.0.1 gets nothing);
  * the request carries the secret in the page's cookie (HttpOnly, SameSite=Strict),
    which a visit with a one-time ticket (core/webpage.py) sets, the ticket then
    dropped from the address by a redirect;
  * a request that changes anything is a POST whose Origin is this page's and whose
    form holds the page's CSRF token (cross-site forms and scripts are refused);
  * every answer says: no script, style, image or connection but the page's own
    (Content-Security-Policy), never in a frame, no referrer, not cached.
web/server.py checks besides, before a request is read, that the connection comes from
a process of this user (the loopback's socket table says whose it is).
"""
import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time
import urllib.parse

import jinja2

from autosync.core import webpage
from autosync.core.cli import show_time
from autosync.core.messages import escaped, printable
from autosync.web import actions, folders, templates

log = logging.getLogger("autosync.web")

COOKIE = "autosync_page"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
RAW_CSP = "default-src 'none'; sandbox"  # an image served alone: nothing runs, ever
COMMON = [("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "same-origin"),
          ("Cache-Control", "no-store"), ("X-Frame-Options", "DENY"),
          ("Cross-Origin-Opener-Policy", "same-origin"),
          ("Cross-Origin-Resource-Policy", "same-origin")]
MAX_FORM = 64 * 1024
BACK = re.compile(r"/(?:folder|file)?(?:\?[A-Za-z0-9_.~%=&-]*)?")
FOLDERS_FOR = 5.0  # seconds a look for the user's folders is used again


class Denied(Exception):
    """A request that gets nothing: (HTTP status, why in one line)."""


def quote(path):
    """A name -> its bytes percent-encoded (any name, not only UTF-8, survives)."""
    return urllib.parse.quote(os.fsencode(str(path)), safe="")


def unquote(text):
    return os.fsdecode(urllib.parse.unquote_to_bytes(text))


def parse_pairs(text):
    """A query string or a form body -> {name: value}, each value decoded as a name is
    (bytes that are not UTF-8 kept as surrogates); the last of a repeated name wins."""
    found = {}
    for part in text.split("&"):
        if part:
            name, _, value = part.partition("=")
            found[unquote(name.replace("+", " "))] = unquote(value.replace("+", " "))
    return found


def relative(rel):
    """A path inside the folder as the page was given it; Denied if it leads out."""
    if not rel or "\0" in rel:
        raise Denied(400, "no path given")
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise Denied(400, "not a path inside the folder: %s" % printable(rel))
    return rel


class App:
    """The WSGI application of one page server."""

    def __init__(self, port, secret, configs):
        self.port, self.secret, self.configs = port, secret, list(configs)
        self.hosts = {"127.0.0.1:%d" % port, "localhost:%d" % port}
        self.csrf = hmac.new(secret.encode(), b"csrf", hashlib.sha256).hexdigest()
        self.used = set()  # tickets' nonces already taken
        self.said = {}  # id -> (ok, words) of an action, shown once on the page it goes back to
        self.lock = threading.Lock()
        self.last_request = time.monotonic()
        self._found = (0.0, {})
        env = jinja2.Environment(loader=jinja2.DictLoader(templates.TEMPLATES),
                                 autoescape=True, undefined=jinja2.StrictUndefined)
        env.filters.update(q=quote, shown=printable, text=escaped, when=show_time)
        self.env = env

    # --- WSGI -----------------------------------------------------------------------

    def __call__(self, environ, start_response):
        self.last_request = time.monotonic()
        try:
            status, headers, body = self.answer(environ)
        except Denied as e:
            code, why = e.args
            log.info("refused %s %s: %s", environ.get("REQUEST_METHOD"),
                     environ.get("PATH_INFO"), why)
            status, headers, body = code, [("Content-Type", "text/html; charset=utf-8")], \
                self.render("refused.html", why=why)
        headers = headers + COMMON
        if not any(name == "Content-Security-Policy" for name, _ in headers):
            headers.append(("Content-Security-Policy", CSP))
        start_response("%d %s" % (status, REASONS.get(status, "")), headers)
        return [body]

    def answer(self, environ):
        host = environ.get("HTTP_HOST", "")
        if host not in self.hosts:
            raise Denied(421, "this page answers at 127.0.0.1:%d only, not at %s"
                          % (self.port, printable(host[:100])))
        method, path = environ.get("REQUEST_METHOD"), environ.get("PATH_INFO", "")
        query = parse_pairs(environ.get("QUERY_STRING", ""))
        if method == "GET" and path == "/" and "ticket" in query:
            return self.enter(query["ticket"])
        if not self.has_secret(environ):
            raise Denied(403, "no secret: open this page with dvcs-autosync open")
        if method == "GET":
            route = GETS.get(path)
            if route is None:
                raise Denied(404, "no such page")
            return route(self, query)
        if method == "POST":
            route = POSTS.get(path)
            if route is None:
                raise Denied(404, "no such action")
            form = self.checked_form(environ)
            return route(self, form)
        raise Denied(405, "only GET and POST")

    def enter(self, ticket):
        with self.lock:
            ok = webpage.ticket_ok(self.secret, ticket, self.used)
        if not ok:
            raise Denied(403, "this ticket is used or out of date: run dvcs-autosync open "
                               "again")
        cookie = "%s=%s; Path=/; HttpOnly; SameSite=Strict" % (COOKIE, self.secret)
        return 303, [("Location", "/"), ("Set-Cookie", cookie),
                     ("Content-Type", "text/plain")], b""

    def has_secret(self, environ):
        for part in environ.get("HTTP_COOKIE", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self.secret.encode()):
                return True
        return False

    def checked_form(self, environ):
        origin = environ.get("HTTP_ORIGIN")
        if origin not in {"http://" + h for h in self.hosts}:
            raise Denied(403, "a request from another site (Origin %s)"
                          % printable(str(origin)[:100]))
        if environ.get("HTTP_SEC_FETCH_SITE", "same-origin") != "same-origin":
            raise Denied(403, "a request from another site")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_FORM:
            raise Denied(400, "a form of the wrong size")
        body = environ["wsgi.input"].read(length).decode("ascii", "replace")
        form = parse_pairs(body)
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            raise Denied(403, "the form's token is missing or wrong: reload the page")
        return form

    # --- helpers --------------------------------------------------------------------

    def render(self, name, **values):
        return self.env.get_template(name).render(**values).encode("utf-8")

    def html(self, name, **values):
        return 200, [("Content-Type", "text/html; charset=utf-8")], self.render(
            name, csrf=self.csrf, **values)

    def folders(self):
        when, found = self._found
        if time.monotonic() - when > FOLDERS_FOR:
            found = folders.find(self.configs)
            self._found = (time.monotonic(), found)
        return found

    def folder(self, values):
        found = self.folders().get(values.get("f", ""))
        if found is None:
            self._found = (0.0, {})
            found = self.folders().get(values.get("f", ""))
        if found is None:
            raise Denied(404, "no synced folder of yours has this id")
        return found

    def said_for(self, query):
        with self.lock:
            return self.said.pop(query.get("said", ""), None)

    def done(self, form, ok, words):
        """After an action: back to the page it came from, its words shown there once."""
        back = form.get("back", "/")
        if not BACK.fullmatch(back):  # one of our own addresses, never another site's
            back = "/"
        key = os.urandom(8).hex()
        with self.lock:
            self.said[key] = (ok, words)
            while len(self.said) > 50:
                self.said.pop(next(iter(self.said)))
        back += ("&" if "?" in back else "?") + "said=" + key + "#said"
        return 303, [("Location", back), ("Content-Type", "text/plain")], b""

    # --- pages ----------------------------------------------------------------------

    def overview(self, query):
        found = sorted(self.folders().values(), key=lambda f: f.path)
        return self.html("overview.html", title="Your synced folders", said=self.said_for(query),
                         folders=[(f, folders.state(f)) for f in found])

    def folder_page(self, query):
        folder = self.folder(query)
        rel = query.get("path", "").strip().strip("/") or None
        if rel is not None:
            rel = os.path.normpath(rel)
            relative(rel)
        changes = folders.timeline(folder, rel)
        copies, conflict_error = [], None
        try:
            copies = folders.conflicts(folder)
        except (folders.HistoryError, ValueError) as e:
            conflict_error = "cannot list the conflict copies: %s" % e
        back = "/folder?f=%s%s" % (folder.id, "&path=" + quote(rel) if rel else "")
        return self.html("folder.html", title=printable(folder.path), folder=folder,
                         st=folders.state(folder), said=self.said_for(query),
                         machines=folders.machines(changes if rel is None
                                                   else folders.timeline(folder)),
                         copies=copies, conflict_error=conflict_error,
                         removed=folders.removed(folder), changes=changes, filter=rel,
                         big_files=folders.big_files(folder),
                         back=back)

    def file_page(self, query):
        folder = self.folder(query)
        rel = relative(unquote(query["qpath"]) if "qpath" in query else query.get("path", ""))
        versions = folders.versions(folder, rel)
        revs = [v.rev for v in versions]
        picked = revs.index(query["rev"]) if query.get("rev") in revs else 0
        base = "/file?f=%s&path=%s" % (folder.id, quote(rel))
        values = dict(title=printable(rel), folder=folder, rel=rel, versions=versions,
                      picked=picked, said=self.said_for(query), back=base,
                      gone=not os.path.lexists(os.path.join(folder.path, rel)),
                      a=query.get("a") or (revs[1] if len(revs) > 1 else None),
                      b=query.get("b") or (revs[0] if revs else None), diff=None,
                      # the slider runs oldest (left) to newest (right)
                      hrefs=["%s&rev=%s" % (base, r) for r in reversed(revs)],
                      labels=["%s, %s" % (show_time(v.time), escaped(v.host))
                              for v in reversed(versions)])
        if versions:
            values["preview"] = self.preview(folder, rel, versions[picked])
        if query.get("a") in revs and query.get("b") in revs:
            values.update(self.compare(folder, rel, versions, query["a"], query["b"]))
        return self.html("file.html", **values)

    def preview(self, folder, rel, version):
        data = folders.content(folder, version.rev, rel)
        if data is None:
            return {"kind": "none", "words": "Not there in this version (removed, or a "
                                             "folder)."}
        if folders.image_type(rel, data):
            return {"kind": "image", "src": "/raw?f=%s&path=%s&rev=%s" % (
                folder.id, quote(rel), version.rev)}
        text = folders.as_text(data)
        if text is None:
            return {"kind": "none", "words": "Not text: %d bytes." % len(data)}
        return {"kind": "text", "text": text}

    def compare(self, folder, rel, versions, a, b):
        by_rev = {v.rev: v for v in versions}
        if by_rev[a].time > by_rev[b].time:
            a, b = b, a
        old, new = (folders.as_text(folders.content(folder, r, rel) or b"") for r in (a, b))
        words = ""
        if old is None or new is None:
            lines, words = [], "One of the two versions is not text: no line to compare."
        else:
            lines = folders.diff(old, new)
            if not lines:
                words = "The two versions are the same."
        return {"diff": lines, "diff_words": words, "a_when": by_rev[a].time,
                "b_when": by_rev[b].time}

    def raw(self, query):
        folder = self.folder(query)
        rel = relative(query.get("path", ""))
        rev = query.get("rev", "")
        if rev not in {v.rev for v in folders.versions(folder, rel)}:
            raise Denied(404, "no such version")
        data = folders.content(folder, rev, rel)
        kind = folders.image_type(rel, data)
        if kind is None:
            raise Denied(404, "not an image")
        return 200, [("Content-Type", kind), ("Content-Security-Policy", RAW_CSP),
                     ("Content-Disposition", "inline")], data

    def status_json(self, query):
        st = folders.state(self.folder(query))
        shown = {k: escaped(st[k]) if isinstance(st[k], str) else st[k]
                 for k in ("colour", "words", "fix", "progress", "paused", "running")}
        return 200, [("Content-Type", "application/json")], json.dumps(shown).encode()

    # --- actions --------------------------------------------------------------------

    def do_pause(self, form):
        return self.done(form, *actions.pause(self.folder(form)))

    def do_resume(self, form):
        return self.done(form, *actions.pause(self.folder(form), resume=True))

    def do_restore(self, form):
        folder = self.folder(form)
        rel = relative(unquote(form.get("path", "")))
        rev = form.get("rev") or None
        if rev is not None and not all(c in "0123456789abcdef" for c in rev):
            raise Denied(400, "not a revision")
        return self.done(form, *actions.restore(folder, rel, rev))

    def do_keep(self, form):
        folder = self.folder(form)
        copy = relative(unquote(form.get("copy", "")))
        return self.done(form, *actions.keep(folder, copy, form.get("keep", "")))


REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 421: "Misdirected Request"}
GETS = {"/": App.overview, "/folder": App.folder_page, "/file": App.file_page,
        "/raw": App.raw, "/status.json": App.status_json,
        "/static/page.css": lambda self, q: (200, [("Content-Type", "text/css")],
                                             templates.CSS.encode()),
        "/static/page.js": lambda self, q: (200, [("Content-Type", "text/javascript")],
                                            templates.JS.encode())}
POSTS = {"/pause": App.do_pause, "/resume": App.do_resume, "/restore": App.do_restore,
         "/keep": App.do_keep}

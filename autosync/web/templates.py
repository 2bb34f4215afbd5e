"""The history page's templates (Jinja2, autoescaped), its style sheet and its script.

Kept here as text, served by the page itself (/static/...): the page fetches nothing
from anywhere else, and works offline. Every name and message goes through Jinja's
escaping (and is shown as `printable` writes it: quotes, newlines and control
characters as C escapes), never through `|safe`.
"""

BASE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} - dvcs-autosync</title>
<link rel="stylesheet" href="/static/page.css">
<script src="/static/page.js" defer></script>
</head>
<body>
<header><a class="home" href="/">dvcs-autosync</a> <span>history</span></header>
<main>
{% if said %}<p class="said {{ 'ok' if said[0] else 'bad' }}" id="said">{{ said[1] | text }}</p>{% endif %}
{% block main %}{% endblock %}
</main>
</body>
</html>
"""

STATUS = """{% macro status_box(folder, st, csrf, back) %}
<section class="status {{ st.colour }}" data-status="{{ folder.id }}">
  <p class="words">{{ st.words | text }}</p>
  <p class="fix">{{ (st.fix or '') | text }}</p>
  <p class="progress">{{ st.progress or '' }}</p>
  {% if st.running %}
  <form method="post" action="{{ '/resume' if st.paused else '/pause' }}" class="pause">
    <input type="hidden" name="csrf" value="{{ csrf }}">
    <input type="hidden" name="f" value="{{ folder.id }}">
    <input type="hidden" name="back" value="{{ back }}">
    <button type="submit" id="pause-{{ folder.id }}">{{ 'Resume syncing' if st.paused
      else 'Pause syncing' }}</button>
  </form>
  {% endif %}
</section>
{% endmacro %}
"""

OVERVIEW = """{% extends "base.html" %}{% from "status.html" import status_box %}
{% block main %}
<h1>Your synced folders</h1>
{% for folder, st in folders %}
<article class="folder">
  <h2><a href="/folder?f={{ folder.id }}">{{ folder.path | shown }}</a></h2>
  {{ status_box(folder, st, csrf, "/") }}
</article>
{% else %}
<p>No synced folder found: no dvcs-autosync runs for you, and ~/.autosync names none.</p>
{% endfor %}
{% endblock %}
"""

FOLDER = """{% extends "base.html" %}{% from "status.html" import status_box %}
{% block main %}
<h1>{{ folder.path | shown }}</h1>
{{ status_box(folder, st, csrf, back) }}
{% if machines %}
<section><h2>Machines</h2>
<ul class="machines">{% for host, when in machines %}
<li><b>{{ host | shown }}</b>: last change {{ when | when }}</li>{% endfor %}</ul>
{% if st.last_push %}<p class="small">This machine last pushed {{ st.last_push.time | when }}{%
 if st.unpushed %}; {{ st.unpushed }} commits not pushed yet{% endif %}.</p>{% endif %}
</section>
{% endif %}
{% if big_files %}<section id="big-files"><h2>Big files</h2><p>{{ big_files }}</p></section>{% endif %}
{% if conflict_error %}<p class="said bad">{{ conflict_error | text }}</p>{% endif %}
{% if copies %}
<section id="conflicts"><h2>Conflicts</h2>
<p class="small">Two machines changed these files while apart: both versions are kept, one at
the file, the other beside it as a copy. Keep one (the other stays in history) or keep both.</p>
<table>
<tr><th>File</th><th>Copy</th><th></th></tr>
{% for c in copies %}
<tr class="conflict">
  <td><a href="/file?f={{ folder.id }}&amp;path={{ c.path | q }}">{{ c.path | shown }}</a>
    <span class="small">({{ 'the other machine\\'s version' if c.mine else
    ('this machine\\'s version' if c.mine == false else 'version') }})</span></td>
  <td><a href="/file?f={{ folder.id }}&amp;path={{ c.copy | q }}">{{ c.copy | shown }}</a>
    <span class="small">(from {{ (c.person ~ ' on ' if c.person else '') ~ c.host | shown }}, {{ c.time | when }})</span></td>
  <td class="buttons">
  <form method="post" action="/keep">
    <input type="hidden" name="csrf" value="{{ csrf }}">
    <input type="hidden" name="f" value="{{ folder.id }}">
    <input type="hidden" name="copy" value="{{ c.copy | q }}">
    <input type="hidden" name="back" value="{{ back }}">
    {% if c.mine is not none %}
    <button name="keep" value="{{ 'theirs' if c.mine else 'mine' }}">Keep the file's version</button>
    <button name="keep" value="{{ 'mine' if c.mine else 'theirs' }}">Keep the copy's version</button>
    {% endif %}
    <button name="keep" value="both">Keep both</button>
  </form></td>
</tr>
{% endfor %}
</table></section>
{% endif %}
{% if removed %}
<section id="removed"><h2>Removed files</h2>
<table>
<tr><th>File</th><th>Removed</th><th>On</th><th></th></tr>
{% for r in removed %}
<tr class="gone">
  <td><a href="/file?f={{ folder.id }}&amp;path={{ r.path | q }}">{{ r.path | shown }}</a></td>
  <td>{{ r.time | when }}</td><td>{{ r.host | shown }}</td>
  <td><form method="post" action="/restore">
    <input type="hidden" name="csrf" value="{{ csrf }}">
    <input type="hidden" name="f" value="{{ folder.id }}">
    <input type="hidden" name="path" value="{{ r.path | q }}">
    <input type="hidden" name="back" value="{{ back }}">
    <button>Bring back</button></form></td>
</tr>
{% endfor %}
</table></section>
{% endif %}
<section id="timeline"><h2>Changes</h2>
<form method="get" action="/folder" class="filter">
  <input type="hidden" name="f" value="{{ folder.id }}">
  <label>File or folder <input type="text" name="path" value="{{ filter or '' }}"
    placeholder="e.g. notes/todo.txt"></label>
  <button>Filter</button>{% if filter %} <a href="/folder?f={{ folder.id }}">all changes</a>{% endif %}
</form>
<table class="timeline">
<tr><th>When</th><th>Machine</th><th>Who</th><th>What</th><th>Files</th></tr>
{% for c in changes %}
<tr>
  <td class="when">{{ c.time | when }}</td><td>{{ c.host | shown }}</td><td class="who">{{ c.author | shown }}</td>
  <td>{% if c.text %}<b class="note">{{ c.text | text }}</b><br>{% endif %}{{ c.subject | text }}</td>
  <td><ul class="files">{% for what, path in c.files[:20] %}
    <li><span class="{{ what }}">{{ what }}</span>
    <a href="/file?f={{ folder.id }}&amp;path={{ path | q }}">{{ path | shown }}</a></li>
    {% endfor %}{% if c.files | length > 20 %}<li>... and {{ c.files | length - 20 }} more</li>{% endif %}</ul></td>
</tr>
{% else %}
<tr><td colspan="4">No change{% if filter %} of {{ filter | shown }}{% endif %} in history.</td></tr>
{% endfor %}
</table></section>
{% endblock %}
"""

FILE = """{% extends "base.html" %}
{% block main %}
<p><a href="/folder?f={{ folder.id }}">&larr; {{ folder.path | shown }}</a></p>
<h1 class="name">{{ rel | shown }}</h1>
{% if not versions %}<p>This path has no history.</p>{% else %}
<section id="versions"><h2>Versions, newest first</h2>
{% if versions | length > 1 %}
<p class="slider"><input type="range" id="slider" min="0" max="{{ versions | length - 1 }}"
  value="{{ versions | length - 1 - picked }}" data-hrefs="{{ hrefs | tojson | forceescape }}"
  data-labels="{{ labels | tojson | forceescape }}"> <span id="slider-label">{{ labels[versions | length - 1 - picked] }}</span></p>
{% endif %}
<form method="get" action="/file">
<input type="hidden" name="f" value="{{ folder.id }}">
<input type="hidden" name="qpath" value="{{ rel | q }}">
<table class="versions">
<tr><th>When</th><th>Machine</th><th>Who</th><th>What</th><th>Compare</th><th></th></tr>
{% for v in versions %}
<tr class="version{{ ' picked' if loop.index0 == picked }}">
  <td class="when"><a href="/file?f={{ folder.id }}&amp;path={{ rel | q }}&amp;rev={{ v.rev }}">{{ v.time | when }}</a>
    {% if loop.first %}<span class="small">(now)</span>{% endif %}</td>
  <td>{{ v.host | shown }}</td><td class="who">{{ v.author | shown }}</td>
  <td>{{ v.action | text }}{% if v.text %}<br><b class="note">{{ v.text | text }}</b>{% endif %}</td>
  <td><input type="radio" name="a" value="{{ v.rev }}" {{ 'checked' if v.rev == a }} aria-label="old">
      <input type="radio" name="b" value="{{ v.rev }}" {{ 'checked' if v.rev == b }} aria-label="new"></td>
  <td>{% if (not loop.first or gone) and v.action != 'removed' %}<button form="restore-{{ loop.index0 }}" class="restore">Restore this version</button>{% endif %}</td>
</tr>
{% endfor %}
</table>
<button>Compare the two versions</button>
</form>
{% for v in versions %}{% if (not loop.first or gone) and v.action != 'removed' %}
<form method="post" action="/restore" id="restore-{{ loop.index0 }}">
  <input type="hidden" name="csrf" value="{{ csrf }}">
  <input type="hidden" name="f" value="{{ folder.id }}">
  <input type="hidden" name="path" value="{{ rel | q }}">
  <input type="hidden" name="rev" value="{{ v.rev }}">
  <input type="hidden" name="back" value="{{ back }}">
</form>{% endif %}{% endfor %}
</section>
{% if diff is not none %}
<section id="diff"><h2>What changed from {{ a_when | when }} to {{ b_when | when }}</h2>
{% if diff %}<pre class="diff">{% for kind, line in diff %}<span class="{{ kind }}">{{ line }}</span>
{% endfor %}</pre>{% else %}<p>{{ diff_words }}</p>{% endif %}
</section>
{% endif %}
<section id="preview"><h2>The version of {{ versions[picked].time | when }}</h2>
{% if preview.kind == 'text' %}<pre class="text">{{ preview.text }}</pre>
{% elif preview.kind == 'image' %}<img alt="the version of {{ versions[picked].time | when }}" src="{{ preview.src }}">
{% else %}<p>{{ preview.words }}</p>{% endif %}
</section>
{% endif %}
{% endblock %}
"""

REFUSED = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Refused - dvcs-autosync</title></head>
<body><h1>Refused</h1><p>{{ why | text }}</p></body></html>
"""

TEMPLATES = {"base.html": BASE, "status.html": STATUS, "overview.html": OVERVIEW,
             "folder.html": FOLDER, "file.html": FILE, "refused.html": REFUSED}

CSS = """
:root { font-family: system-ui, sans-serif; color: #222; background: #fafafa; }
body { margin: 0; }
header { background: #24425c; color: #fff; padding: .6em 1.2em; }
header a.home { color: #fff; font-weight: bold; text-decoration: none; }
main { max-width: 70em; margin: 0 auto; padding: 1em 1.2em 3em; }
h1 { font-size: 1.4em; word-break: break-all; }
h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .35em .5em; border-bottom: 1px solid #ddd; }
td.when { white-space: nowrap; }
.small { color: #666; font-size: .9em; }
.status { border-radius: .4em; padding: .6em 1em; border-left: .5em solid #888; background: #eee; }
.status p { margin: .2em 0; }
.status .words { font-weight: bold; }
.status.ok { border-color: #2e8b3a; background: #e6f4e8; }
.status.busy { border-color: #2a6fb0; background: #e4eef8; }
.status.paused { border-color: #b08a2a; background: #f8f1e0; }
.status.bad { border-color: #b3261e; background: #fbe6e4; }
.status.off, .status.lost { border-color: #777; background: #eee; }
.said { padding: .5em 1em; border-radius: .3em; white-space: pre-wrap; }
.said.ok { background: #e6f4e8; } .said.bad { background: #fbe6e4; }
ul.files, ul.machines { margin: 0; padding-left: 1.1em; }
span.added { color: #2e8b3a; } span.removed { color: #b3261e; }
span.modified { color: #2a6fb0; }
b.note { color: #5a3d8a; }
pre { background: #fff; border: 1px solid #ddd; padding: .6em; overflow: auto; max-height: 40em; }
pre.diff span.add { background: #e6f4e8; } pre.diff span.del { background: #fbe6e4; }
pre.diff span.hunk { color: #666; }
tr.picked { background: #fff6d0; }
img { max-width: 100%; border: 1px solid #ddd; }
button { cursor: pointer; margin: .1em; }
input[type=range] { width: 60%; }
"""

JS = """"use strict";
document.querySelectorAll("[data-status]").forEach(function (box) {
  var words = box.querySelector(".words"), fix = box.querySelector(".fix"),
      progress = box.querySelector(".progress"), form = box.querySelector("form.pause");
  function poll() {
    fetch("/status.json?f=" + encodeURIComponent(box.dataset.status),
          {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (s) {
        box.className = "status " + s.colour;
        words.textContent = s.words;
        fix.textContent = s.fix || "";
        progress.textContent = s.progress || "";
        if (form) {
          form.style.display = s.running ? "" : "none";
          form.action = s.paused ? "/resume" : "/pause";
          form.querySelector("button").textContent = s.paused ? "Resume syncing" : "Pause syncing";
        }
      })
      .catch(function () {
        box.className = "status lost";
        words.textContent = "The page's server does not answer: trying again...";
      })
      .finally(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
});
var slider = document.getElementById("slider");
if (slider) {
  var hrefs = JSON.parse(slider.dataset.hrefs), labels = JSON.parse(slider.dataset.labels);
  slider.addEventListener("input", function () {
    document.getElementById("slider-label").textContent = labels[slider.value];
  });
  slider.addEventListener("change", function () { location.href = hrefs[slider.value]; });
}
"""

#!/usr/bin/env python
"""Make asv's published dashboard self-contained: run after ``asv publish``.

asv's ``index.html`` loads jQuery, Flot and its plugins, stupidtable, blueimp-md5 and Bootstrap
from CDNs (the asv package ships only its own scripts), so without a network the page shows
nothing. This copies the copies kept in ``asv_bench/www_vendor/`` (see its README) into
``<html_dir>/vendor/`` and points every remote ``<script src>`` / ``<link href>`` of the published
HTML files at them, dropping the ``integrity``/``crossorigin`` attributes (a page opened from
``file://`` cannot pass a CORS integrity check). A remote URL it has no copy for (a newer asv)
is an error, listed.

    python asv_bench/offline_html.py [HTML_DIR]     # default asv_bench/.asv/html
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "www_vendor")

#: The URLs asv 0.6's index.html names, and the local file standing for each.
FILES = {
    "https://code.jquery.com/jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": "jquery.flot.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": "jquery.flot.time.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js":
        "jquery.flot.selection.js",
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js":
        "jquery.flot.categories.js",
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js":
        "jquery.flot.orderBars.js",
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": "stupidtable.min.js",
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": "md5.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": "bootstrap.min.js",
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": "bootstrap.min.css",
}

_TAG = re.compile(r"<(script|link)\b[^>]*>", re.I)
_URL = re.compile(r"""\b(src|href)=["'](https?://[^"']+)["']""", re.I)
_DROP = re.compile(r"""\s+(integrity|crossorigin|referrerpolicy)(=("[^"]*"|'[^']*'))?""", re.I)


def rewrite(html: str, unknown: list) -> str:
    def tag(match: re.Match) -> str:
        text = match.group(0)
        url = _URL.search(text)
        if url is None:
            return text
        local = FILES.get(url.group(2))
        if local is None:
            unknown.append(url.group(2))
            return text
        text = text.replace(url.group(0), f'{url.group(1)}="vendor/{local}"')
        return _DROP.sub("", text)

    return _TAG.sub(tag, html)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    html_dir = argv[0] if argv else os.path.join(HERE, ".asv", "html")
    pages = glob.glob(os.path.join(html_dir, "*.html"))
    if not pages:
        print(f"offline_html: no HTML in {html_dir} (run asv publish first)", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(html_dir, "vendor"), exist_ok=True)
    for name in sorted(set(FILES.values())):
        shutil.copyfile(os.path.join(VENDOR, name), os.path.join(html_dir, "vendor", name))
    unknown: list = []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            html = f.read()
        new = rewrite(html, unknown)
        if new != html:
            with open(page, "w", encoding="utf-8") as f:
                f.write(new)
    if unknown:
        print("offline_html: no local copy of: " + ", ".join(sorted(set(unknown))), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

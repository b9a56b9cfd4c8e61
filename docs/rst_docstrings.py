"""A Griffe extension for the API reference (mkdocs.yml): nvtx-cffi's docstrings are written for
``help()`` and doctest, in reStructuredText habits, and mkdocstrings renders them as Markdown.
This turns the constructs Markdown would misread into their Markdown spelling, in the rendered
reference only (the docstrings themselves stay as they are):

* doctest blocks (``>>>`` up to a blank line) become ``pycon`` code blocks (Markdown would read
  ``[x][y]`` in their output as a link);
* a literal block (a paragraph ending in ``::`` and the indented lines after it) becomes a code
  block, and the ``::`` a ``:``;
* a simple table (``====  ====`` borders) becomes a code block (its borders would be headings);
* a ``----`` underline makes its title line bold (it would be a heading);
* ``:func:`name```-style roles become ``name`` as code.
"""
from __future__ import annotations

import re
from typing import Any, List

import griffe

ROLE = re.compile(r":(?:func|meth|class|mod|attr|data|exc|obj):`~?\.?([^`]+)`")
TABLE_BORDER = re.compile(r"^\s*=+(\s+=+)+\s*$")
UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def to_markdown(text: str) -> str:
    lines = text.split("\n")
    out: List[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            margin = line[:_indent(line)]
            out.append(margin + "```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(margin + "```")
            continue
        if TABLE_BORDER.match(line):
            margin = line[:_indent(line)]
            borders = 0
            out.append(margin + "```text")
            while i < len(lines) and borders < 3 and lines[i].strip():
                borders += bool(TABLE_BORDER.match(lines[i]))
                out.append(lines[i])
                i += 1
            out.append(margin + "```")
            continue
        if UNDERLINE.match(line) and out and out[-1].strip():
            title = out.pop()
            out.append(title[:_indent(title)] + "**" + title.strip() + "**")
            out.append("")
            i += 1
            continue
        if stripped.endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            block_start = i + 2
            while block_start < len(lines) and not lines[block_start].strip():
                block_start += 1
            if block_start < len(lines) and _indent(lines[block_start]) > _indent(line):
                text_part = line.rstrip()[:-2].rstrip()
                if text_part.strip():
                    out.append(ROLE.sub(r"`\1`", text_part) + ":")
                out.append("")
                margin = line[:_indent(line)]
                out.append(margin + "```text")
                i = block_start
                while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > _indent(line)):
                    out.append(lines[i])
                    i += 1
                while out[-1].strip() == "":
                    out.pop()
                out.append(margin + "```")
                out.append("")
                continue
        out.append(ROLE.sub(r"`\1`", line))
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)

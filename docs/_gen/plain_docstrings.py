"""A griffe extension of the docs build: the project's docstrings are plain text, not Markdown.

They write mathematics as text (`[<v_1, x>]_+`, `W_{i+1}`, `max|<x_i, x_j>|`, `2 * x`), which Markdown would
read as links, raw HTML, emphasis or headings (and mkdocs-autorefs as cross-references it cannot resolve).
This extension escapes those characters in every docstring before mkdocstrings renders it, so the API
reference shows each docstring as written, and it turns each citation of the science ("S3", "section 0") into a
link to its page.  It keeps what is meant as markup: `code spans` in backticks,
indented blocks after a blank line (rendered as code), and "- " bullets.
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_SPECIAL = str.maketrans({"\\": "\\\\", "[": "\\[", "]": "\\]", "*": "\\*", "_": "\\_", "<": "&lt;", ">": "&gt;",
                          "#": "\\#", "|": "\\|", "&": "&amp;", "{": "\\{", "}": "\\}"})


#: "S3" and "section 0" cite the science pages (docs/science/s3.md, s0.md), which carry the anchors science-s3, ...
_CITATION = re.compile(r"\bS(\d{1,2})\b|\b(section 0)\b")


def _cite(match: re.Match) -> str:
    if match.group(1) is not None:
        return f"[S{match.group(1)}][science-s{match.group(1)}]"
    return f"[{match.group(2)}][science-s0]"


def _escape_prose(text: str) -> str:
    return _CITATION.sub(_cite, text.translate(_SPECIAL))


def _escape_text(text: str) -> str:
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_escape_prose(text[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape_prose(text[last:]))
    return "".join(out)


def plain(docstring: str) -> str:
    """The docstring with Markdown's special characters escaped outside code spans and indented blocks."""
    lines = docstring.split("\n")
    result: list[str] = []
    in_block = False
    paragraph: list[str] = []

    def flush():
        if paragraph:
            result.extend(_escape_text("\n".join(paragraph)).split("\n"))
            paragraph.clear()

    previous_blank = True
    for line in lines:
        blank = not line.strip()
        indented = line.startswith("    ")
        if in_block and (indented or blank):
            result.append(line)
        elif indented and previous_blank:
            flush()
            in_block = True
            result.append(line)
        else:
            in_block = False
            if blank:
                flush()
                result.append(line)
            else:
                paragraph.append(line)
        previous_blank = blank
    flush()
    return "\n".join(result)


def comment_docstring(attr) -> str | None:
    """The `#:` comment lines right above a module or class attribute (the Sphinx convention the package uses
    for its constants: `#: every installed model class, by its kind`), as the attribute's docstring."""
    try:
        lines = Path(attr.filepath).read_text(encoding="utf-8").splitlines()
    except (OSError, TypeError, ValueError):
        return None
    found: list[str] = []
    i = (attr.lineno or 0) - 2
    while 0 <= i < len(lines) and lines[i].lstrip().startswith("#:"):
        found.insert(0, lines[i].lstrip()[2:].strip())
        i -= 1
    return " ".join(found) or None


class PlainDocstrings(griffe.Extension):
    """Escape Markdown in every docstring of the loaded objects, and give constants documented by `#:` comments
    their comment as docstring (see the module docstring)."""

    def on_attribute_instance(self, *, attr, **kwargs) -> None:
        if attr.docstring is None:
            text = comment_docstring(attr)
            if text:
                attr.docstring = griffe.Docstring(text, parent=attr)

    def on_object(self, *, obj, **kwargs) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and not getattr(docstring, "_plain_done", False):
            docstring.value = plain(docstring.value)
            docstring._plain_done = True

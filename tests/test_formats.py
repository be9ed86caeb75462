"""Document readers: HTML, PDF, DOCX, Markdown, reStructuredText and text, on generated files and, when the
Debian documentation packages are installed, on real manuals; and every bad input reported as `file: reason`."""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import re
import subprocess
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from typedrag.corpus import CorpusError, SourceFile, iter_documents, iter_source_files, read_file
from typedrag.records import Block

POSTGRES_HTML = Path("/usr/share/doc/postgresql-doc-15/html")
PYTHON_HTML = Path("/usr/share/doc/python3.11/html")
R_MANUALS = Path("/usr/share/R/doc/manual")
DEBIAN_REFERENCE_PDF = Path("/usr/share/debian-reference/debian-reference.en.pdf")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
MARKUP = re.compile(
    r"</?(?:a|p|div|span|li|ul|td|tr|table|h\d|em|strong|code)(?:\s[^<>]*)?/?>|&(?:amp|lt|gt|nbsp|quot|#\d+);"
)


def read(*sources, strict=False):
    """(documents with their blocks as lists, problems as strings)."""
    problems = []
    docs = [
        dataclasses.replace(doc, blocks=list(doc.iter_blocks()))
        for doc in iter_documents([str(s) for s in sources], strict=strict, problems=problems)
    ]
    return docs, [str(p) for p in problems]


def read_one(path):
    docs, problems = read(path)
    assert problems == [] and len(docs) == 1, problems
    return docs[0]


def text_of(doc) -> str:
    return "\n\n".join(block.text for block in doc.blocks)


def requires(path: Path, package: str) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found: apt-get install {package}")


# --- a minimal PDF writer (Helvetica text at given positions), so the tests need no PDF library ------------


def pdf_bytes(pages: list[list[tuple[float, float, str]]], *, title: str = "", image_only: bool = False) -> bytes:
    """A real PDF: each page is a list of (x, y, text) drawn in the order given, in 10 pt Helvetica."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    pages_id = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 4 >>\nstream\n\x00\xff\xff\x00\nendstream"
    )
    kids = []
    for page in pages:
        if image_only:
            content = b"q 500 0 0 700 50 50 cm /Im1 Do Q"
        else:
            content = b"".join(
                b"BT /F1 10 Tf %.1f %.1f Td (%s) Tj ET\n"
                % (x, y, text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("cp1252"))
                for x, y, text in page
            )
        stream = add(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> >>"
                % (pages_id, stream, font, image)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    info = add(b"<< /Title (%s) >>" % title.encode()) if title else None
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    trailer = b"/Size %d /Root %d 0 R" % (len(objects) + 1, catalog) + (b" /Info %d 0 R" % info if info else b"")
    out.write(b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref))
    return out.getvalue()


def prose_lines(prefix: str, count: int) -> list[str]:
    return [f"{prefix} sentence number {i} tells the reader about {prefix} things." for i in range(count)]


SUBJECTS = ["moss", "fern", "lichen", "algae", "fungus", "sedge", "rush", "reed"]


# --- HTML ----------------------------------------------------------------------------------------------

DOCBOOK_PAGE = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "x"><html xmlns="http://www.w3.org/1999/xhtml"><head>
<title>24.1. Routine Vacuuming</title><style>body { color: red }</style><script>var nav = "Prev";</script></head>
<body><div class="navheader"><table summary="Navigation header"><tr><th colspan="5">24.1. Routine Vacuuming</th></tr>
<tr><td><a accesskey="p" href="a.html">Prev</a> </td><td><a accesskey="u" href="b.html">Up</a></td>
<th>Chapter 24. Routine Database Maintenance Tasks</th><td><a accesskey="h" href="index.html">Home</a></td>
<td> <a accesskey="n" href="c.html">Next</a></td></tr></table><hr /></div>
<div class="sect1"><div class="titlepage"><h2 class="title">24.1. Routine Vacuuming</h2></div>
<p>PostgreSQL databases require periodic maintenance known as <em>vacuuming</em> &amp; analysis.</p>
<div class="sect2"><h3 class="title">24.1.2. Recovering Disk Space</h3>
<p>In PostgreSQL, an <code>UPDATE</code> or <code>DELETE</code> of a row does not immediately remove it.</p>
<div class="tip"><h3 class="title">Tip</h3><p>Plain VACUUM may not be satisfactory.</p></div>
<p>After the tip, still about disk space.</p>
<pre class="programlisting">VACUUM FULL
    my_table;</pre>
<ul><li><p>first item</p></li><li>second <b>item</b><ul><li>nested item</li></ul></li></ul>
<table class="table"><thead><tr><th>Setting</th><th>Default</th></tr></thead>
<tbody><tr><td><code>autovacuum</code></td><td>on</td></tr><tr><td>vacuum_cost_delay</td><td>0</td></tr></tbody></table>
</div></div>
<div class="navfooter"><hr /><table summary="Navigation footer"><tr><td><a href="a.html">Prev</a> </td>
<td><a href="b.html">Up</a></td><td> <a href="c.html">Next</a></td></tr><tr><td>24.0 Routine </td>
<td><a href="index.html">Home</a></td><td> 24.2. Updating Planner Statistics</td></tr></table></div>
<div id="docComments"><h2>Submit correction</h2><p>If you see anything in the documentation that is not correct, submit a correction.</p></div>
</body></html>"""

SPHINX_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8" />
<title>os.path — Common pathname manipulations &#8212; Python 3.11 documentation</title></head><body>
<div class="related" role="navigation"><h3>Navigation</h3><ul><li><a href="x">next</a> |</li><li><a href="y">previous</a></li></ul></div>
<div class="document"><div class="body" role="main"><section id="module-os.path">
<h1><code>os.path</code> — Common pathname manipulations<a class="headerlink" href="#x">¶</a></h1>
<p>This module implements some useful functions on pathnames.</p>
<dl class="py function"><dt class="sig"><span class="pre">os.path.abspath</span>(<em>path</em>)<a class="headerlink" href="#y">¶</a></dt>
<dd><p>Return a normalized absolutized version of the pathname <em>path</em>.</p></dd></dl>
<section><h2>Examples<a class="headerlink" href="#z">¶</a></h2><div class="admonition note"><p class="admonition-title">Note</p><p>Paths are strings.</p></div></section>
</section></div></div>
<div class="sphinxsidebar" role="navigation"><h3><a href="contents.html">Table of Contents</a></h3><h4>Previous topic</h4><p>pathlib</p>
<div role="note"><h3>This Page</h3><ul><li><a href="bugs.html">Report a Bug</a></li><li><a href="s">Show Source</a></li></ul></div>
<div id="searchbox" role="search"><h3>Quick search</h3><form><input type="text" name="q" /></form></div></div>
<div class="footer">&copy; <a href="copyright.html">Copyright</a> 2001-2024, Python Software Foundation.</div></body></html>"""

NAVIGATION = [
    "Prev",
    "Next",
    "Up",
    "Home",
    "Submit correction",
    "Navigation",
    "Table of Contents",
    "Previous topic",
    "This Page",
    "Show Source",
    "Quick search",
    "Copyright",
    "Report a Bug",
    "previous",
    "¶",
]


def test_docbook_page_gives_main_content_with_sections_lists_tables_and_code(tmp_path):
    (tmp_path / "routine-vacuuming.html").write_text(DOCBOOK_PAGE, encoding="utf-8")
    doc = read_one(tmp_path / "routine-vacuuming.html")
    assert doc.title == "24.1. Routine Vacuuming" and doc.text == ""
    by_text = {block.text: block for block in doc.blocks}
    assert by_text["PostgreSQL databases require periodic maintenance known as vacuuming & analysis."].section == ()
    space = ("24.1.2. Recovering Disk Space",)
    assert by_text["In PostgreSQL, an UPDATE or DELETE of a row does not immediately remove it."].section == space
    assert by_text["After the tip, still about disk space."].section == space  # "Tip" is a box title, not a section
    assert by_text["VACUUM FULL\n    my_table;"].section == space
    assert [by_text[item].section for item in ("- first item", "- second item", "- nested item")] == [space] * 3
    assert by_text["Setting | Default"].section == by_text["autovacuum | on\nvacuum_cost_delay | 0"].section == space
    kinds = [(block.kind.value, block.order) for block in doc.blocks]
    assert kinds == [
        ("prose", None),
        ("prose", None),
        ("admonition", None),
        ("prose", None),
        ("code", None),
        ("item", None),
        ("item", None),
        ("item", None),
        ("table-head", 1),
        ("table", 1),
    ]
    assert by_text["Tip\nPlain VACUUM may not be satisfactory."].section == space  # the box, its title included
    text = text_of(doc)
    for word in NAVIGATION + ["var nav", "color: red", "Chapter 24"]:
        assert word not in text, word
    assert not MARKUP.search(text)


def test_sphinx_page_drops_sidebar_related_bar_and_footer(tmp_path):
    (tmp_path / "os.path.html").write_text(SPHINX_PAGE, encoding="utf-8")
    doc = read_one(tmp_path / "os.path.html")
    assert doc.title == "os.path — Common pathname manipulations"  # the site suffix of <title> dropped
    assert [(b.section, b.text) for b in doc.blocks] == [
        ((), "This module implements some useful functions on pathnames."),
        ((), "os.path.abspath(path)"),
        ((), "Return a normalized absolutized version of the pathname path."),
        (("Examples",), "Note\nPaths are strings."),
    ]


def test_html_charset_from_bom_meta_or_guess(tmp_path):
    (tmp_path / "latin1.html").write_bytes(
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1"></head>'
        "<body><p>Crème brûlée — “quoted”</p></body></html>".encode("cp1252")
    )
    (tmp_path / "meta.html").write_bytes('<meta charset="koi8-r"><p>Привет, мир</p>'.encode("koi8-r"))
    (tmp_path / "undeclared.html").write_bytes(
        "<html><body><p>Déjà vu à la café, naïve façade</p></body></html>".encode("cp1252")
    )
    (tmp_path / "utf16.html").write_bytes("\ufeff<html><body><p>Grüße aus Köln</p></body></html>".encode("utf-16-le"))
    texts = {d.doc_id: text_of(d) for d in read(tmp_path)[0]}
    assert texts == {
        "latin1.html": "Crème brûlée — “quoted”",  # ISO-8859-1 means windows-1252 on the web
        "meta.html": "Привет, мир",
        "undeclared.html": "Déjà vu à la café, naïve façade",
        "utf16.html": "Grüße aus Köln",
    }


def test_deeply_nested_and_malformed_html_reads(tmp_path):
    depth = 100_000
    (tmp_path / "deep.html").write_text(
        "<html><body>" + "<div>" * depth + "deep text" + "</div>" * depth + "<p>after</p>"
    )
    (tmp_path / "soup.html").write_text(
        "<html><body><p>open <b>bold <i>both</b> rest</p><table><tr><td>cell<p>para</table>"
    )
    docs, problems = read(tmp_path)
    assert problems == []
    assert [text_of(d).split() for d in docs] == [
        ["deep", "text", "after"],
        ["open", "bold", "both", "rest", "cell", "para"],
    ]


def test_binary_file_named_html_is_reported(tmp_path):
    (tmp_path / "junk.html").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "good.html").write_text("<p>fine</p>")
    docs, problems = read(tmp_path)
    assert [d.doc_id for d in docs] == ["good.html"]
    assert problems == [f"{tmp_path / 'junk.html'}: not an HTML document (binary?), skipped"]


def test_format_is_chosen_by_content_as_well_as_name(tmp_path):
    (tmp_path / "manual.html").write_bytes(pdf_bytes([[(72, 700, "This HTML file is really a PDF.")]]))
    (tmp_path / "page").write_text(
        "<!DOCTYPE html><html><head><title>No Suffix</title></head><body><p>An HTML page.</p></body></html>"
    )
    (tmp_path / "README").write_text("A text file without a suffix.\n")
    (tmp_path / "report.dat").write_bytes(pdf_bytes([[(72, 700, "A PDF with an odd suffix.")]]))
    (tmp_path / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(200))
    docs, problems = read(tmp_path)
    assert [(d.doc_id, d.title, text_of(d)) for d in docs] == [
        ("README", "README", "A text file without a suffix."),
        ("manual.html", "manual", "This HTML file is really a PDF."),
        ("page", "No Suffix", "An HTML page."),
        ("report.dat", "report", "A PDF with an odd suffix."),
    ]
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'program'}:1: unsupported file type")


def test_a_sphinx_page_without_a_heading_is_titled_by_its_first_heading_or_file_name(tmp_path):
    """Sphinx titles a page with no heading "<no title> — PROJECT documentation"; every page of Debian's Black 23.1
    docs was titled so, and sources and citations showed it."""
    (tmp_path / "the_basics.html").write_text(
        "<html><head><title>&lt;no title&gt; &#8212; Black 23.1.0 documentation</title></head><body>"
        '<div class="body" role="main"><p>Black is a well-behaved Unix-style command-line tool.</p></div></body></html>'
    )
    (tmp_path / "faq.html").write_text(
        "<html><head><title>&lt;no title&gt; &#8212; Docs</title></head><body><h1>Frequently asked</h1>"
        "<p>Answers to common questions.</p></body></html>"
    )
    docs, problems = read(tmp_path)
    assert problems == [] and [d.title for d in docs] == ["Frequently asked", "the_basics"]


def test_control_characters_and_escape_sequences_are_removed(tmp_path):
    (tmp_path / "term.txt").write_text("Colours \x1b[31mred\x1b[0m and a bell\x07 and\x08 backspace.\n")
    (tmp_path / "page.html").write_text("<title>Bad\x1b[1m title</title><p>Para\x01graph \x1b]0;window\x07text</p>")
    docs, problems = read(tmp_path)
    assert problems == []
    assert [(d.title, text_of(d)) for d in docs] == [
        ("Bad title", "Paragraph text"),
        ("term", "Colours red and a bell and backspace."),
    ]


# --- PDF -----------------------------------------------------------------------------------------------


def test_two_column_pdf_is_read_column_by_column(tmp_path):
    """The content stream interleaves the columns line by line (as some writers do); the text must not."""
    left, right = prose_lines("alpha", 30), prose_lines("omega", 30)
    page = [(72, 750, "A Title Spanning Both Columns Of This Page")]
    for i, (a, b) in enumerate(zip(left, right)):
        page += [(40, 700 - 14 * i, a[:45]), (320, 700 - 14 * i, b[:45])]
    (tmp_path / "columns.pdf").write_bytes(pdf_bytes([page]))
    doc = read_one(tmp_path / "columns.pdf")
    words = text_of(doc).split()
    alphas = [i for i, w in enumerate(words) if w == "alpha"]
    omegas = [i for i, w in enumerate(words) if w == "omega"]
    assert len(alphas) == len(omegas) == 30
    assert words.index("Title") < max(alphas) < min(omegas)
    assert all(block.page == 1 for block in doc.blocks)


def test_pdf_running_headers_footers_and_page_numbers_are_dropped(tmp_path):
    pages = []
    for number in range(1, 7):
        lines = [(72, 740, f"Chapter 3: Maintenance Guide {number + 10}")]
        lines += [(72, 700 - 14 * i, text) for i, text in enumerate(prose_lines(SUBJECTS[number], 5))]
        lines.append((300, 40, str(number)))
        pages.append(lines)
    (tmp_path / "guide.pdf").write_bytes(pdf_bytes(pages, title="Maintenance Guide"))
    doc = read_one(tmp_path / "guide.pdf")
    assert doc.title == "Maintenance Guide"
    text = text_of(doc)
    assert "Chapter 3" not in text
    assert not re.search(r"^\d+$", text, re.M)
    assert [b.page for b in doc.blocks] == [1, 2, 3, 4, 5, 6]
    assert all(f"{SUBJECTS[b.page]} sentence number 4" in b.text for b in doc.blocks)


def test_pdf_words_hyphenated_at_line_ends_are_joined(tmp_path):
    lines = [
        "We need more infor-",
        "mation about the well-known case of self-",
        "Contained systems and the co-",
        "operation of peers.",
    ]
    (tmp_path / "hyphens.pdf").write_bytes(pdf_bytes([[(72, 700 - 12 * i, line) for i, line in enumerate(lines)]]))
    text = text_of(read_one(tmp_path / "hyphens.pdf"))
    assert (
        text.split()
        == "We need more information about the well-known case of self- Contained systems and the cooperation of peers.".split()
    )


def test_encrypted_pdf_is_reported_unless_it_opens_without_a_password(tmp_path):
    pypdf = pytest.importorskip("pypdf", reason="pypdf (a test dependency) writes the encrypted PDFs")
    (tmp_path / "plain.pdf").write_bytes(pdf_bytes([[(72, 700, "Secret text about budgets.")]]))
    for name, user_password in (("locked.pdf", "s3cret"), ("owner-only.pdf", "")):
        writer = pypdf.PdfWriter(clone_from=str(tmp_path / "plain.pdf"))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
        writer.write(tmp_path / name)
    (tmp_path / "plain.pdf").unlink()
    docs, problems = read(tmp_path)
    assert [(d.doc_id, text_of(d)) for d in docs] == [("owner-only.pdf", "Secret text about budgets.")]
    assert problems == [f"{tmp_path / 'locked.pdf'}: encrypted PDF, skipped"]


def test_scanned_corrupt_and_empty_pdfs_are_reported(tmp_path):
    (tmp_path / "scan.pdf").write_bytes(pdf_bytes([[], []], image_only=True))
    (tmp_path / "cut.pdf").write_bytes(pdf_bytes([[(72, 700, "text")]])[:200])
    (tmp_path / "fake.pdf").write_text("not a pdf at all")
    docs, problems = read(tmp_path)
    assert docs == []
    assert problems[0].startswith(f"{tmp_path / 'cut.pdf'}: corrupt PDF (")
    assert problems[1].startswith(f"{tmp_path / 'fake.pdf'}: corrupt PDF (")
    assert problems[2] == f"{tmp_path / 'scan.pdf'}: no text layer; OCR it first"
    with pytest.raises(CorpusError, match="no text layer"):
        read(tmp_path / "scan.pdf", strict=True)


# --- DOCX ----------------------------------------------------------------------------------------------


def make_docx(path: Path, *, core_title: str = "") -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = core_title
    document.add_paragraph("Field Guide to Ferns", style="Title")
    document.add_paragraph("An introduction before any heading.")
    document.add_heading("Habitat", level=1)
    document.add_paragraph("Ferns grow in damp shade.")
    document.add_heading("Soil", level=2)
    document.add_paragraph("Acidic soil suits most species.")
    document.add_paragraph("peat", style="List Bullet")
    document.add_paragraph("leaf mould", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, [("Species", "Height"), ("Bracken", "2 m"), ("Maidenhair", "0.3 m")]):
        row.cells[0].text, row.cells[1].text = cells
    document.add_heading("Propagation", level=1)
    document.add_paragraph("Spores form on the underside of fronds.")
    document.save(path)


def test_docx_headings_become_sections_with_tables_and_lists(tmp_path):
    make_docx(tmp_path / "ferns.docx")
    doc = read_one(tmp_path / "ferns.docx")
    assert doc.title == "Field Guide to Ferns"
    assert [(b.section, b.text) for b in doc.blocks] == [
        ((), "An introduction before any heading."),
        (("Habitat",), "Ferns grow in damp shade."),
        (("Habitat", "Soil"), "Acidic soil suits most species."),
        (("Habitat", "Soil"), "- peat"),
        (("Habitat", "Soil"), "- leaf mould"),
        (("Habitat", "Soil"), "Species | Height\nBracken | 2 m\nMaidenhair | 0.3 m"),
        (("Propagation",), "Spores form on the underside of fronds."),
    ]
    assert [b.kind.value for b in doc.blocks] == ["prose", "prose", "prose", "item", "item", "table", "prose"]
    make_docx(tmp_path / "titled.docx", core_title="Ferns (core properties)")
    assert read_one(tmp_path / "titled.docx").title == "Ferns (core properties)"


def test_corrupt_docx_is_reported(tmp_path):
    make_docx(tmp_path / "good.docx")
    data = (tmp_path / "good.docx").read_bytes()
    (tmp_path / "truncated.docx").write_bytes(data[: len(data) // 2])
    with zipfile.ZipFile(tmp_path / "other.docx", "w") as archive:
        archive.writestr("content.txt", "a zip, but not a Word document")
    (tmp_path / "good.docx").unlink()
    docs, problems = read(tmp_path)
    assert docs == []
    assert len(problems) == 2, problems
    assert all(
        re.fullmatch(rf"{re.escape(str(tmp_path))}/(other|truncated)\.docx: corrupt DOCX \(.+\), skipped", p)
        for p in problems
    )


# --- Markdown, reStructuredText, text ------------------------------------------------------------------


def test_markdown_atx_and_setext_headings_and_fenced_code(tmp_path):
    (tmp_path / "guide.md").write_text(
        "# Garden Guide\n\nIntro with a [link](http://x.org) and ![a picture](p.png).\n\n"
        "Planting\n========\n\nDig a hole.\n\n## Watering ##\n\n```sh\n# not a heading\nwater --daily\n```\n\n"
        "Pests\n-----\n\nSlugs.\n\n---\n\nAfter a rule.\n",
        encoding="utf-8",
    )
    doc = read_one(tmp_path / "guide.md")
    assert doc.title == "Garden Guide"
    assert [(b.section, b.text) for b in doc.blocks] == [
        ((), "Intro with a link and a picture."),
        (("Planting",), "Dig a hole."),
        (("Planting", "Watering"), "# not a heading\nwater --daily"),
        (("Planting", "Pests"), "Slugs."),
        (("Planting", "Pests"), "After a rule."),
    ]


def test_markdown_front_matter_is_metadata_not_text(tmp_path):
    """Regression (issue 55): Docker's pages open with YAML front matter, which was read as a setext heading and
    made the title ('title: "attach" description: ...'). Its `title` is the page's title; none of it is text."""
    (tmp_path / "attach.md").write_text(
        '---\ntitle: "attach"\ndescription: "The attach command description and usage"\nkeywords: "attach, running"\n---\n\n'
        "# attach\n\nAttach local standard input to a running container.\n\n## Description\n\nUse `docker attach`.\n",
        encoding="utf-8",
    )
    doc = read_one(tmp_path / "attach.md")
    assert doc.title == "attach"
    assert [(b.section, b.text) for b in doc.blocks] == [
        ((), "Attach local standard input to a running container."),
        (("Description",), "Use `docker attach`."),
    ]
    # Debian's docker-doc pages (the files this was written for) open with a blank line before the "---".
    (tmp_path / "container.md").write_text(
        '\n---\ntitle: "container"\ndescription: "The container command"\n---\n\n# container\n\nManage containers.\n',
        encoding="utf-8",
    )
    doc = read_one(tmp_path / "container.md")
    assert doc.title == "container" and [(b.section, b.text) for b in doc.blocks] == [((), "Manage containers.")]
    # No title in it: the first heading is the title, as without front matter.
    (tmp_path / "run.md").write_text("---\nkeywords: run\n---\n# Run a container\n\nStarts it.\n", encoding="utf-8")
    doc = read_one(tmp_path / "run.md")
    assert doc.title == "Run a container" and [b.text for b in doc.blocks] == ["Starts it."]
    # A thematic break over a paragraph is not front matter (YAML does not read it as a mapping): read as before.
    (tmp_path / "rule.md").write_text("---\nJust a paragraph after a rule.\n\nMore text.\n", encoding="utf-8")
    doc = read_one(tmp_path / "rule.md")
    assert [b.text for b in doc.blocks] == ["Just a paragraph after a rule.", "More text."]


def test_restructuredtext_sections_follow_adornment_order(tmp_path):
    (tmp_path / "manual.rst").write_text(
        "=============\nRoutine Tasks\n=============\n\nEvery database needs care.\n\n"
        "Vacuuming\n=========\n\nUse :command:`VACUUM` and ``ANALYZE``, see `the docs <https://x.org>`_.\n\n"
        ".. note::\n   :class: small\n\n   Autovacuum helps.\n\nDisk Space\n----------\n\nReclaim it.\n\n"
        "Statistics\n==========\n\nKeep them fresh.\n",
        encoding="utf-8",
    )
    doc = read_one(tmp_path / "manual.rst")
    assert doc.title == "Routine Tasks"
    assert [(b.section, b.text.strip()) for b in doc.blocks] == [
        ((), "Every database needs care."),
        (("Vacuuming",), "Use VACUUM and ANALYZE, see the docs."),
        (("Vacuuming",), "Note\nAutovacuum helps."),  # an admonition, its title as HTML shows it
        (("Vacuuming", "Disk Space"), "Reclaim it."),
        (("Statistics",), "Keep them fresh."),
    ]


def test_list_items_table_rows_and_code_stay_lines_of_their_own(tmp_path):
    (tmp_path / "notes.md").write_text(
        "# Notes\n\nTo vacuum a table\nrun the command:\n\n- VACUUM first\n- ANALYZE next\n\n"
        "```\nVACUUM FULL t;\nANALYZE t;\n```\n"
    )
    doc = read_one(tmp_path / "notes.md")
    assert [b.text for b in doc.blocks] == [
        "To vacuum a table run the command:",
        "- VACUUM first",
        "- ANALYZE next",
        "VACUUM FULL t;\nANALYZE t;",
    ]
    assert [b.kind.value for b in doc.blocks] == ["prose", "item", "item", "code"]


def test_text_paragraphs_become_blocks_and_long_ones_are_split(tmp_path):
    (tmp_path / "notes.txt").write_text("First paragraph,\nsecond line.\n\n\nSecond paragraph.\n\n" + "word " * 10_000)
    doc = read_one(tmp_path / "notes.txt")
    # A hard-wrapped line joins its paragraph: the line break was the editor's, not the text's.
    assert [b.text for b in doc.blocks[:2]] == ["First paragraph, second line.", "Second paragraph."]
    assert all(len(b.text) <= 16_000 for b in doc.blocks) and len(doc.blocks) >= 4
    assert sum(b.text.count("word") for b in doc.blocks) == 10_000


def test_huge_text_file_is_streamed_in_bounded_memory(tmp_path):
    """Regression: a .txt was read whole (`read_bytes()`): a file bigger than the memory limit died of MemoryError."""
    big = tmp_path / "big.txt"
    paragraph = ("word " * 2000 + "\n\n").encode()
    with open(big, "wb") as f:
        for _ in range(200_000_000 // len(paragraph)):
            f.write(paragraph)
    script = (
        "import resource, sys\n"
        "from typedrag.corpus import iter_documents\n"
        "import typedrag.corpus.formats.markup\n"
        "size = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024\n"
        "limit = size + 100 * 2**20\n"  # far less than the file
        "resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "problems = []\n"
        "words = sum(b.text.count('word') for d in iter_documents([sys.argv[1]], problems=problems) for b in d.iter_blocks())\n"
        "print(words, len(problems))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(big)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(2000 * (200_000_000 // len(paragraph))), "0"]


# --- files, folders, the reader API ----------------------------------------------------------------------


@pytest.mark.skipif(IS_ROOT, reason="root reads files and lists folders whatever their permissions")
def test_unreadable_file_and_folder_are_reported(tmp_path):
    (tmp_path / "secret.html").write_text("<p>hidden</p>")
    (tmp_path / "secret.html").chmod(0)
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "a.txt").write_text("text")
    (tmp_path / "locked").chmod(0)
    (tmp_path / "open.txt").write_text("visible")
    try:
        docs, problems = read(tmp_path)
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [d.doc_id for d in docs] == ["open.txt"]
    assert problems == [f"{tmp_path / 'locked'}: permission denied", f"{tmp_path / 'secret.html'}: permission denied"]


def test_symbolic_link_loops_are_reported_not_walked(tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "sub" / "page.md").write_text("# Page\ntext")
    (tmp_path / "docs" / "sub" / "again").symlink_to(tmp_path / "docs")
    (tmp_path / "docs" / "self.txt").symlink_to(tmp_path / "docs" / "self.txt")
    (tmp_path / "docs" / "outside").symlink_to(tmp_path)
    docs, problems = read(tmp_path / "docs")
    assert [d.doc_id for d in docs] == ["sub/page.md"]
    root = tmp_path / "docs"
    assert problems == [
        f"{root / 'outside'}: symbolic link to a folder outside the corpus folder (--follow-links reads it), skipped",
        f"{root / 'self.txt'}: broken symbolic link or symbolic link loop, skipped",
        f"{root / 'sub' / 'again'}: symbolic link loop, skipped",
    ]


def test_source_files_are_listed_in_path_order_with_relative_keys(tmp_path):
    for name in ("b.txt", "a/z.md", "a/b/c.html", "a.txt", ".hidden/x.txt", "a/.git/HEAD"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    problems = []
    files = list(iter_source_files([tmp_path, tmp_path / "b.txt"], problems))
    assert [f.key for f in files] == ["a/b/c.html", "a/z.md", "a.txt", "b.txt", "b.txt"]
    assert files[0] == SourceFile(
        tmp_path / "a" / "b" / "c.html", "a/b/c.html", str(tmp_path / "a" / "b" / "c.html"), tmp_path.resolve()
    )
    assert files[-1].root is None  # given directly: read wherever it leads
    assert files[-1].label == str(tmp_path / "b.txt") and problems == []
    with pytest.raises(CorpusError, match="no such file"):
        list(iter_source_files([tmp_path / "missing"], problems))


def read_in_worker(file: SourceFile) -> tuple[list, list]:
    """What an indexer's process pool does: read one file, materialising the blocks in the worker."""
    problems = []
    docs = [
        dataclasses.replace(d, blocks=list(d.iter_blocks())) for d in read_file(file, strict=False, problems=problems)
    ]
    return docs, problems


def test_read_file_runs_in_a_process_pool_and_documents_pickle(tmp_path):
    (tmp_path / "page.html").write_text(DOCBOOK_PAGE, encoding="utf-8")
    make_docx(tmp_path / "ferns.docx")
    (tmp_path / "bad.pdf").write_text("junk")
    files = list(iter_source_files([tmp_path], []))
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(read_in_worker, files))
    assert [[d.doc_id for d in docs] for docs, _ in results] == [["bad.pdf"][:0], ["ferns.docx"], ["page.html"]]
    assert [str(p) for p in results[0][1]][0].startswith(f"{tmp_path / 'bad.pdf'}: corrupt PDF")
    local = read_in_worker(files[2])[0][0]
    assert results[2][0][0] == local and pickle.loads(pickle.dumps(local)) == local
    assert isinstance(local.blocks[0], Block)


# --- real manuals (installed by the Debian documentation packages) -----------------------------------------

NAV_LINE = re.compile(
    r"^(?:Prev|Next|Up|Home|Navigation|Table of Contents|Previous topic|Next topic|This Page|Show Source|Report a Bug|Quick search|Submit correction)$",
    re.M,
)


def test_postgresql_manual_pages_read_without_navigation_or_markup():
    requires(POSTGRES_HTML, "postgresql-doc-15")
    pages = sorted(POSTGRES_HTML.glob("*.html"))
    problems = []
    docs = list(iter_documents([str(p) for p in pages], problems=problems))
    assert problems == [] and len(docs) == len(pages) > 1000
    sections = set()
    for doc in docs:
        blocks = list(doc.iter_blocks())
        assert blocks, doc.doc_id
        page = (POSTGRES_HTML / doc.doc_id).read_text(encoding="utf-8")
        for block in blocks:
            assert not NAV_LINE.search(block.text), (doc.doc_id, block.text)
            # the manual's own markup has class attributes; the XML of its examples does not
            assert not re.search(r"<[a-z0-9]+ [^<>]*class=\"", block.text), (doc.doc_id, block.text)
            for entity in re.findall(r"&#?\w+;", block.text):  # only where the page shows one ("&amp;amp;")
                assert f"&amp;{entity[1:]}" in page, (doc.doc_id, entity, block.text)
            sections.add((doc.doc_id, block.section))
    assert ("sql-createtable.html", ("Description",)) in sections
    assert ("routine-vacuuming.html", ("25.1.2. Recovering Disk Space",)) in sections or (
        "routine-vacuuming.html",
        ("24.1.2. Recovering Disk Space",),
    ) in sections
    assert {d.doc_id: d.title for d in docs}["sql-createtable.html"] == "CREATE TABLE"


def test_python_docs_pages_read_without_sphinx_chrome():
    requires(PYTHON_HTML, "python3.11-doc")
    pages = sorted((PYTHON_HTML / "library").glob("*.html"))
    problems = []
    docs = {d.doc_id: d for d in iter_documents([str(p) for p in pages], problems=problems)}
    assert problems == [] and len(docs) == len(pages) > 100
    chrome = re.compile(
        r"Previous topic|Next topic|This Page|Show Source|Quick search|©|Copyright \d{4}|Created using|^Navigation$|^Table of Contents$",
        re.M,
    )
    for name, doc in docs.items():
        for block in doc.iter_blocks():
            assert not chrome.search(block.text), (name, block.text)
            assert "¶" not in block.text, (name, block.text)
    assert docs["os.path.html"].title == "os.path — Common pathname manipulations"


def test_r_manual_pdfs_give_pages_on_every_block_without_running_headers():
    requires(R_MANUALS / "R-intro.pdf", "r-doc-pdf")
    doc = read_one(R_MANUALS / "R-intro.pdf")
    blocks = doc.blocks
    assert doc.title == "An Introduction to R"
    assert all(isinstance(b.page, int) and b.page >= 1 for b in blocks)
    assert max(b.page for b in blocks) > 100
    headers = [b for b in blocks if re.search(r"^Chapter \d+: [A-Z].* \d+$", b.text, re.M)]
    assert len(headers) <= 5, [b.text[:80] for b in headers]  # a chapter's header shown on one page only may stay
    vectors = [b for b in blocks if b.section[-1:] == ("Vectors and assignment",)]
    assert vectors and "R operates on named data structures" in " ".join(b.text for b in vectors).replace("\n", " ")
    assert "packages supplied with R" in text_of(doc).replace("\n", " ")  # "pack-" + "ages" joined


def test_a_pdf_heading_stays_a_line_of_its_own_and_does_not_run_into_its_first_paragraph():
    """Once a paragraph's lines were joined with spaces, a bookmarked heading ran into the prose below it
    ("2.3.2 Data frame objects Data frames are the R structures ...") and was quoted so."""
    requires(R_MANUALS / "R-lang.pdf", "r-doc-pdf")
    blocks = read_one(R_MANUALS / "R-lang.pdf").blocks
    frames = [b for b in blocks if b.section[-1:] == ("Data frame objects",)]
    assert frames[0].text == "2.3.2 Data frame objects"
    assert frames[1].text.startswith("Data frames are the R structures which most closely mimic")


def test_debian_reference_pdf_keeps_pages_and_sections():
    requires(DEBIAN_REFERENCE_PDF, "debian-reference-en")
    doc = read_one(DEBIAN_REFERENCE_PDF)
    assert doc.title == "Debian Reference"
    assert all(b.page for b in doc.blocks)
    assert sum(bool(b.section) for b in doc.blocks) > 0.7 * len(doc.blocks)


def test_a_sphinx_builds_copies_of_its_sources_are_not_read_twice(tmp_path):
    """A Sphinx HTML folder holds `_sources/page.txt` beside `page.html`: the pages are read, the copies
    reported once and skipped (the Python docs gave 1,027 documents for 530 pages before)."""
    (tmp_path / "_sources").mkdir()
    (tmp_path / "_sources" / "intro.rst.txt").write_text("Intro\n=====\n\nThe same text as the page.\n")
    (tmp_path / "intro.html").write_text(
        "<html><head><title>Intro</title></head><body><p>The same text as the page.</p></body></html>"
    )
    (tmp_path / "searchindex.js").write_text("Search.setIndex({})")
    docs, problems = read(tmp_path)
    assert [d.doc_id for d in docs] == ["intro.html"]
    assert (
        problems[0]
        == f"{tmp_path / '_sources'}: a Sphinx build's copies of its pages' sources, skipped (the HTML pages are read)"
    )
    (tmp_path / "searchindex.js").unlink()  # not a Sphinx build: a folder named _sources is content like any other
    assert [d.doc_id for d in read(tmp_path)[0]] == ["_sources/intro.rst.txt", "intro.html"]


HAPROXY_LIKE = """<html><head><title>HAProxy - Configuration Manual</title></head><body>
<h2>5.2. Server and default-server options</h2>
<div class="keyword"><b>slowstart</b> &lt;start_time_in_ms&gt;</div><pre class="text">The "slowstart" parameter for a server accepts a value in milliseconds which
indicates after how long a server which has just come back up will run at
full speed.

- maxconn: the number of connections accepted by the server will grow from 1
  to 100% of the usual dynamic limit.

  Example :
        server srv1 192.168.1.1:80 slowstart 10s

The slowstart never applies when HAProxy starts.
</pre>
<pre>backend app
    server srv1 192.168.1.1:80 slowstart 10s</pre>
</body></html>"""


def test_a_pre_the_page_marks_as_text_is_read_as_prose_paragraphs(tmp_path):
    """HAProxy's manuals are plain text wrapped by hand in `<pre class="text">`: read as code, no sentence of them
    was ever quoted, and every offline answer over the manual abstained (23 of 24 questions). Their paragraphs are
    prose, their lines one text; a paragraph indented deeper than the block stays code; any other `<pre>` is code."""
    from typedrag.corpus.formats.html import read_html
    from typedrag.records import BlockKind

    page = tmp_path / "configuration.html"
    page.write_text(HAPROXY_LIKE, encoding="utf-8")
    blocks = [(block.kind, block.text) for block in read_html(page).blocks]
    prose = [text for kind, text in blocks if kind == BlockKind.PROSE]
    code = [text for kind, text in blocks if kind == BlockKind.CODE]
    assert (
        'The "slowstart" parameter for a server accepts a value in milliseconds which indicates after how long a '
        "server which has just come back up will run at full speed."
    ) in prose
    assert "The slowstart never applies when HAProxy starts." in prose
    items = [text for kind, text in blocks if kind == BlockKind.ITEM]
    assert items == [
        "- maxconn: the number of connections accepted by the server will grow from 1 to 100% of the usual dynamic limit."
    ]
    assert any(text.startswith("Example :") and "slowstart 10s" in text for text in code)
    assert any(text.startswith("backend app") for text in code)  # the plain <pre>
    assert not any("192.168.1.1" in text and "parameter" in text for text in prose)


def test_a_menu_the_page_hides_until_clicked_is_not_read_into_the_sentence(tmp_path):
    """HAProxy's manuals follow each keyword named in a sentence with a Bootstrap drop-down menu of the sections
    defining it, hidden until clicked; read, it ran into the sentence: `"ca-fileThis keyword is available in
    sections :Bind optionsServer and default-server options", "ca-verify-file"`. So is an element marked `hidden`."""
    from typedrag.corpus.formats.html import read_html

    page = tmp_path / "configuration.html"
    page.write_text(
        '<html><head><title>Configuration</title></head><body><pre class="text">Assigns a default directory to '
        'fetch SSL CA certificates from when a\nrelative path is used with &quot;<span class="dropdown"><a '
        'class="dropdown-toggle" data-toggle="dropdown" href="#">ca-file<span class="caret"></span></a><ul '
        'class="dropdown-menu"><li class="dropdown-header">This keyword is available in sections :</li><li><a '
        'href="#ca-file">Bind options</a></li><li><a href="#ca-file-server">Server and default-server options</a>'
        '</li></ul></span>&quot; or &quot;<a href="#ca-verify-file">ca-verify-file</a>&quot;.</pre>'
        "<p>Shown.<span hidden> Not shown.</span></p></body></html>",
        encoding="utf-8",
    )
    texts = [block.text for block in read_html(page).blocks]
    assert texts == [
        'Assigns a default directory to fetch SSL CA certificates from when a relative path is used with "ca-file" '
        'or "ca-verify-file".',
        "Shown.",
    ]

"""Benchmark the document readers: pages (or MB) per second per format, peak memory, and, with
--compare, the libraries the readers were chosen from, on the same real manuals.

Needs the Debian documentation packages (apt-get install postgresql-doc-15 python3.11-doc r-doc-pdf
debian-reference-en); the comparison needs the candidates too (pip install trafilatura beautifulsoup4
pypdf pdfminer.six). Every measurement runs in a fresh process, so peak RSS is that reader's alone.

    python bench/bench_readers.py              # typedrag's readers, per format, and a 300 MB PDF
    python bench/bench_readers.py --compare    # plus the candidate libraries: speed and text quality
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_line  # noqa: E402

POSTGRES = Path("/usr/share/doc/postgresql-doc-15/html")
R_INTRO = Path("/usr/share/R/doc/manual/R-intro.pdf")
PDFS = [
    R_INTRO,
    Path("/usr/share/R/doc/manual/R-exts.pdf"),
    Path("/usr/share/debian-reference/debian-reference.en.pdf"),
]
NAV_WORDS = (re.compile(r"\bPrev\b"), re.compile(r"\bHome\b"))  # the manual's text never has these words
RUNNING_HEADER = re.compile(r"^Chapter \d+: .* \d+$", re.M)


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would count the parent's memory at fork)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


# --- measurements, each run in a child process: `python bench_readers.py --child NAME ARGS` ------------------


def child_typedrag(paths: list[str]) -> dict:
    """Read `paths` with typedrag, consuming every block; units are pages for PDFs, files otherwise."""
    from typedrag.corpus import iter_documents

    problems: list = []
    started = time.perf_counter()
    files = chars = blocks = 0
    pages: set[tuple[str, int]] = set()
    for doc in iter_documents(paths, problems=problems):
        files += 1
        for block in doc.iter_blocks():
            blocks += 1
            chars += len(block.text)
            if block.page:
                pages.add((doc.doc_id, block.page))
    seconds = time.perf_counter() - started
    return {
        "files": files,
        "pages": len(pages),
        "blocks": blocks,
        "chars": chars,
        "seconds": seconds,
        "problems": len(problems),
        "rss_mb": peak_rss_mb(),
    }


def html_quality(name: str, texts: dict[str, str]) -> dict:
    """Pages whose text has a Prev/Next/Up/Home line, and <pre> blocks whose first line is missing."""
    from selectolax.lexbor import LexborHTMLParser

    leaked = sum(all(word.search(text) for word in NAV_WORDS) for text in texts.values())
    code = lost = 0
    for page, text in texts.items():
        squashed = " ".join(text.split())
        for pre in LexborHTMLParser((POSTGRES / page).read_bytes().decode()).css("pre"):
            first = " ".join(pre.text().strip().split("\n")[0].split())
            if first:
                code += 1
                lost += first not in squashed
    return {"library": name, "pages": len(texts), "nav_leaked_pages": leaked, "code_blocks": code, "code_lost": lost}


def child_html(library: str, paths: list[str]) -> dict:
    started = time.perf_counter()
    texts = {}
    for path in paths:
        data = Path(path).read_bytes()
        if library == "typedrag (selectolax)":
            from typedrag.corpus.formats.html import decode, parse_html

            texts[Path(path).name] = "\n\n".join(b.text for b in parse_html(decode(data), "").blocks)
        elif library == "trafilatura":
            import trafilatura

            texts[Path(path).name] = trafilatura.extract(data, include_tables=True, include_formatting=False) or ""
        elif library == "beautifulsoup4 (lxml) get_text":
            from bs4 import BeautifulSoup

            texts[Path(path).name] = BeautifulSoup(data, "lxml").get_text("\n")
        elif library == "lxml text_content":
            import lxml.html

            texts[Path(path).name] = lxml.html.fromstring(data).text_content()
    seconds = time.perf_counter() - started
    return {**html_quality(library, texts), "pages_per_s": len(paths) / seconds, "rss_mb": peak_rss_mb()}


def pdf_quality(texts: list[str]) -> dict:
    texts = [text.replace("\r\n", "\n") for text in texts]
    joined = " ".join("\n".join(texts).split())
    return {
        "running_headers": sum(len(RUNNING_HEADER.findall(t)) for t in texts),
        "hyphen_repaired": "packages supplied with R" in joined,  # "pack-\nages" on page 9 of R-intro
        "order_ok": "did not mention statistics, yet many people use" in joined,  # an italic word in its place
    }


def child_pdf(library: str, path: str) -> dict:
    started = time.perf_counter()
    if library == "typedrag (pypdfium2 + layout)":
        from typedrag.corpus.formats.pdf import read_pdf

        pages: dict[int, list[str]] = {}
        for block in read_pdf(Path(path)).blocks:
            pages.setdefault(block.page, []).append(block.text)
        texts = ["\n".join(v) for _, v in sorted(pages.items())]
    elif library == "pypdfium2 get_text_range":
        import pypdfium2

        pdf = pypdfium2.PdfDocument(path)
        texts = [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    elif library == "pypdf extract_text":
        import pypdf

        texts = [page.extract_text() for page in pypdf.PdfReader(path).pages]
    else:
        from pdfminer.high_level import extract_text

        texts = extract_text(path).split("\f")
    seconds = time.perf_counter() - started
    return {
        "library": library,
        "file": Path(path).name,
        "pages": len(texts),
        "pages_per_s": len(texts) / seconds,
        **pdf_quality(texts),
        "rss_mb": peak_rss_mb(),
    }


def run_child(*args: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout)


# --- generated inputs --------------------------------------------------------------------------------------


def write_big_pdf(path: Path, pages: int, image_mb: float) -> None:
    """A PDF of `pages` pages, each a line of text and an incompressible image, written object by object."""
    offsets: list[int] = []
    with open(path, "wb") as out:

        def obj(number: int, body: bytes) -> None:
            offsets.append(out.tell())
            out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))

        out.write(b"%PDF-1.4\n")
        obj(1, b"<< /Type /Catalog /Pages 2 0 R >>")
        kids = b" ".join(b"%d 0 R" % (4 + 3 * i) for i in range(pages))
        obj(2, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages))
        obj(3, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        side = int((image_mb * 2**20) ** 0.5)
        for i in range(pages):
            page, content, image = 4 + 3 * i, 5 + 3 * i, 6 + 3 * i
            obj(
                page,
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 3 0 R >> /XObject << /Im %d 0 R >> >> >>" % (content, image),
            )
            topic = "".join(chr(97 + (i // 26**k) % 26) for k in range(3)).encode()  # a different word on each page
            text = (
                b"BT /F1 11 Tf 72 720 Td (The big manual explains the %s topic here.) Tj ET q 400 0 0 400 100 200 cm /Im Do Q"
                % topic
            )
            obj(content, b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text))
            obj(
                image,
                b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                b"/BitsPerComponent 8 /Length %d >>\nstream\n%s\nendstream"
                % (side, side, side * side, os.urandom(side * side)),
            )
        xref = out.tell()
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1))
        out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(offsets) + 1, xref))


def write_docx_files(folder: Path, count: int) -> list[str]:
    import docx

    paths = []
    for n in range(count):
        document = docx.Document()
        document.add_paragraph(f"Report {n}", style="Title")
        for section in range(5):
            document.add_heading(f"Part {section}", level=1)
            for _ in range(4):
                document.add_paragraph("The quarterly figures show steady growth in every region we serve. " * 4)
            table = document.add_table(rows=4, cols=3)
            for row in table.rows:
                for cell in row.cells:
                    cell.text = "figure"
        path = folder / f"report{n}.docx"
        document.save(path)
        paths.append(str(path))
    return paths


def write_markup(folder: Path, megabytes: int) -> dict[str, str]:
    section = "Heading {n}\n==========\n\n" + ("Some prose about the topic at hand, with words. " * 12 + "\n\n") * 8
    body = "".join(section.format(n=n) for n in range(megabytes * 2**20 // len(section)))
    paths = {}
    for suffix, text in ((".txt", body), (".md", body), (".rst", body)):
        path = folder / f"big{suffix}"
        path.write_text(text, encoding="utf-8")
        paths[suffix] = str(path)
    return paths


# --- report ---------------------------------------------------------------------------------------------------


def report_typedrag(scratch: Path, big_pdf_mb: int) -> None:
    print("\ntypedrag readers (every block consumed; peak RSS of the reading process)")
    rows = []
    if POSTGRES.is_dir():
        r = run_child("typedrag", *map(str, sorted(POSTGRES.glob("*.html"))))
        rows.append(("HTML  postgresql-doc-15", f"{r['files'] / r['seconds']:,.0f} pages/s", r))
    for pdf in PDFS:
        if pdf.exists():
            r = run_child("typedrag", str(pdf))
            rows.append((f"PDF   {pdf.name}", f"{r['pages'] / r['seconds']:,.0f} pages/s", r))
    docx_paths = write_docx_files(scratch, 40)
    r = run_child("typedrag", *docx_paths)
    rows.append(("DOCX  40 generated reports", f"{r['files'] / r['seconds']:,.0f} files/s", r))
    for suffix, path in write_markup(scratch, 50).items():
        r = run_child("typedrag", path)
        rows.append((f"{suffix:5} 50 MB generated", f"{Path(path).stat().st_size / 2**20 / r['seconds']:,.1f} MB/s", r))
    big = scratch / "big.pdf"
    write_big_pdf(big, pages=300, image_mb=big_pdf_mb / 300)
    r = run_child("typedrag", str(big))
    rows.append(
        (
            f"PDF   generated {big.stat().st_size / 2**20:,.0f} MB, 300 pages",
            f"{r['pages'] / r['seconds']:,.0f} pages/s",
            r,
        )
    )
    for name, speed, r in rows:
        print(f"  {name:42} {speed:>14}   {r['blocks']:>7,} blocks   peak RSS {r['rss_mb']:,.0f} MB")


def report_comparison() -> None:
    if POSTGRES.is_dir():
        pages = [str(p) for p in sorted(POSTGRES.glob("*.html"))[::4]]  # every 4th page: ~290
        print(f"\nHTML libraries on {len(pages)} postgresql-doc-15 pages (nav = 'Prev' and 'Home' kept)")
        for library in ("typedrag (selectolax)", "trafilatura", "beautifulsoup4 (lxml) get_text", "lxml text_content"):
            r = run_child("html", library, *pages)
            if "error" in r:
                print(f"  {library:32} not measured: {r['error']}")
                continue
            print(
                f"  {library:32} {r['pages_per_s']:>6,.0f} pages/s   nav leaked on {r['nav_leaked_pages']:>3}/{r['pages']} pages   "
                f"<pre> lost {r['code_lost']:>3}/{r['code_blocks']}   peak RSS {r['rss_mb']:,.0f} MB"
            )
    if R_INTRO.exists():
        print(f"\nPDF libraries on {R_INTRO.name} (running headers = 'Chapter N: ... page' lines kept)")
        for library in (
            "typedrag (pypdfium2 + layout)",
            "pypdfium2 get_text_range",
            "pypdf extract_text",
            "pdfminer.six extract_text",
        ):
            r = run_child("pdf", library, str(R_INTRO))
            if "error" in r:
                print(f"  {library:32} not measured: {r['error']}")
                continue
            print(
                f"  {library:32} {r['pages_per_s']:>6,.0f} pages/s   running headers {r['running_headers']:>3}   "
                f"hyphen repaired {'yes' if r['hyphen_repaired'] else 'no ':3}   italic word in place {'yes' if r['order_ok'] else 'no'}   "
                f"peak RSS {r['rss_mb']:,.0f} MB"
            )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, args = sys.argv[2], sys.argv[3:]
        result = (
            child_typedrag(args)
            if kind == "typedrag"
            else child_html(args[0], args[1:])
            if kind == "html"
            else child_pdf(args[0], args[1])
        )
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true", help="also measure the candidate libraries")
    parser.add_argument("--big-pdf-mb", type=int, default=300, help="size of the generated PDF (default 300)")
    options = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as scratch:
        report_typedrag(Path(scratch), options.big_pdf_mb)
    if options.compare:
        report_comparison()


if __name__ == "__main__":
    main()

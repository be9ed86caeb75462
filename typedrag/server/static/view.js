// The source viewer: /view/<collection>?passage=<id> (or ?document=<name>). It asks the API for what to show, with
// the key the main page keeps, so a link carries no key: the original sanitised by the server, the passage marked
// (an HTML, Markdown, text or DOCX document), or a PDF's pages as images with the passage's boxes drawn over them.
// The original's markup arrives sanitised (nh3) and this page's policy allows no script but its own.
"use strict";

const $ = (id) => document.getElementById(id);
const key = (localStorage.getItem("typedrag-api-key") || "").trim();
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const collection = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
const asked = new URLSearchParams(location.search);
const api = `/v1/collections/${encodeURIComponent(collection)}`;
let pdf = null; // {name, count, shown, pages: Map(number -> page with boxes)}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

async function fetchJSON(url) {
  const response = await fetch(url, { headers });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${response.status}: ${body.error?.message || response.statusText}`);
  return body;
}

function where(p) {
  let name = [p.title, p.section].filter(Boolean).join(" › ");
  if (p.page != null) name += p.page_end != null ? `, pp. ${p.page}–${p.page_end}` : `, p. ${p.page}`;
  return name;
}

function toPassage() {
  const target = document.querySelector("#passage-page, #passage");
  if (target) target.scrollIntoView({ block: "center" });
}

async function showPage(number) {
  const page = pdf.pages.get(number) || { number, boxes: [] };
  const response = await fetch(`${api}/documents/${encodeURIComponent(pdf.name)}/pages/${number}.png`, { headers });
  if (!response.ok) throw new Error(`page ${number}: ${response.status}`);
  const url = URL.createObjectURL(await response.blob());
  const frame = document.createElement("div");
  frame.className = "pdf-page";
  if (page.boxes.length) frame.id = "passage-page";
  const image = document.createElement("img");
  image.alt = `page ${number} of ${pdf.name}`;
  image.src = url;
  image.addEventListener("load", () => { URL.revokeObjectURL(url); if (page.boxes.length) toPassage(); }, { once: true });
  frame.append(image);
  for (const [left, top, width, height] of page.boxes) {
    const box = document.createElement("div");
    box.className = "box passage-box";
    box.style.left = `${left * 100}%`;
    box.style.top = `${top * 100}%`;
    box.style.width = `${width * 100}%`;
    box.style.height = `${height * 100}%`;
    frame.append(box);
  }
  $("original").replaceChildren(frame);
  pdf.shown = number;
  $("page-label").textContent = `page ${number} of ${pdf.count}`;
  $("previous").disabled = number <= 1;
  $("next").disabled = number >= pdf.count;
  document.body.dataset.page = String(number);
}

async function main() {
  $("collection").textContent = collection;
  const query = asked.get("passage") ? `passage=${encodeURIComponent(asked.get("passage"))}` : `document=${encodeURIComponent(asked.get("document") || "")}`;
  const shown = await fetchJSON(`${api}/source?${query}`);
  const doc = shown.document || {};
  $("document").textContent = doc.name || asked.get("document") || "";
  if (shown.passage) {
    $("where").textContent = where(shown.passage) || shown.passage.passage_id;
    $("passage").textContent = shown.passage.text;
    $("passage").hidden = false;
    document.title = `typedrag · ${shown.passage.title || shown.passage.passage_id}`;
  } else {
    $("where").textContent = doc.name || "Source";
  }
  const view = shown.view || { kind: "none" };
  let note = shown.note;
  if (!note && shown.passage && view.located === false) note = "The passage's words were not found in the original as shown; the passage is quoted above.";
  if (note) { $("note").textContent = note; $("note").hidden = false; }
  if (doc.original) {
    $("download").href = doc.original;
    $("download").hidden = false;
    $("download").addEventListener("click", async (event) => { // with the key: a plain link would carry none
      event.preventDefault();
      const response = await fetch(doc.original, { headers });
      const link = document.createElement("a");
      link.href = URL.createObjectURL(await response.blob());
      link.download = doc.name;
      link.click();
    });
  }
  if (view.kind === "html") {
    const parsed = new DOMParser().parseFromString(`<!doctype html><body>${view.html}`, "text/html");
    $("original").replaceChildren(...parsed.body.childNodes);
    $("original").dataset.kind = view.format;
    if (view.located) { $("to-passage").hidden = false; toPassage(); }
  } else if (view.kind === "pdf") {
    pdf = { name: doc.name, count: view.page_count, shown: 0, pages: new Map(view.pages.map((p) => [p.number, p])) };
    $("original").classList.add("pdf");
    $("original").dataset.kind = view.format;
    $("pager").hidden = false;
    const first = view.pages.find((p) => p.boxes.length) || view.pages[0] || { number: 1 };
    await showPage(first.number);
    if (view.located) $("to-passage").hidden = false;
  } else {
    $("original").replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: "The original cannot be shown." }));
  }
  document.body.dataset.ready = "1";
}

$("previous").addEventListener("click", () => showPage(pdf.shown - 1).catch((e) => showError(e.message)));
$("next").addEventListener("click", () => showPage(pdf.shown + 1).catch((e) => showError(e.message)));
$("to-passage").addEventListener("click", async () => {
  if (pdf) {
    const first = [...pdf.pages.values()].find((p) => p.boxes.length);
    if (first && first.number !== pdf.shown) await showPage(first.number);
  }
  toPassage();
});
main().catch((error) => { showError(`The source cannot be shown: ${error.message}`); document.body.dataset.ready = "1"; });

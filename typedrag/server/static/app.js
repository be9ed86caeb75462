// The typedrag web page, a conversation: POST /v1/answer/stream with the latest turns as `history` (a bounded
// window, said on the page), read its Server-Sent Events, render progress, the answer as its tokens arrive, then
// with clickable [n] citations and the sources it cites, and the trace (type, plan, aspects, notes) in a details
// view. Earlier turns stay above the question box with their own cited sources; "Start over" forgets them.
// On a server with accounts the page signs in with a key (a session cookie; writes carry its CSRF token), keeps
// each conversation (listed, searched, reopened, renamed, deleted, exported) and takes a verdict on every answer.
// Plain DOM (textContent only, never innerHTML with server text) and no dependencies, so it works air-gapped.
"use strict";

const $ = (id) => document.getElementById(id);
const keyInput = $("api-key");
keyInput.value = localStorage.getItem("typedrag-api-key") || "";
keyInput.addEventListener("change", () => localStorage.setItem("typedrag-api-key", keyInput.value.trim()));

// What the page would obey instead of showing, as the command line escapes it (typedrag.text.for_terminal):
// C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and isolates that make
// text read other than it runs ("Asteroid \u202eevil" shown as "Asteroid live").
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function shown(text) {
  return String(text).replace(HIDDEN, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, shown(value));
  }
  for (const child of children) node.append(typeof child === "string" ? shown(child) : child);
  return node;
}

// What goes with each question: the latest turns, as many as the server reads (typedrag.history.MAX_TURNS and
// MAX_TURN_CHARS), and never more bytes than WINDOW_BYTES, far under the server's request limit (256 KB): a long
// conversation is never refused for its length. The page says when older turns are left out.
const WINDOW_TURNS = 20;
const TURN_CHARS = 4000;
const WINDOW_BYTES = 96 * 1024;
const LISTED = 5; // sources listed for an answer that cites none (an abstention's nearest passages), as the CLI lists them

let started = 0;
let history = []; // the conversation so far, as the API takes it: {role: "user" | "assistant", content}
let current = null; // the answered turn shown in full below: {question, result}
let turnsKept = 0; // answered turns moved up into the thread
let book = { prefix: "", byNumber: new Map() }; // the shown answer's listed sources: only these become links

// The turns sent with the next question: the latest ones within the bounds above, starting with a question.
function windowOf(turns) {
  const sent = [];
  let bytes = 2;
  const size = (turn) => new TextEncoder().encode(JSON.stringify(turn)).length + 1;
  for (let i = turns.length - 1; i >= 0 && sent.length < WINDOW_TURNS; i--) {
    const turn = { role: turns[i].role, content: turns[i].content.slice(0, TURN_CHARS) };
    if (bytes + size(turn) > WINDOW_BYTES) break;
    bytes += size(turn);
    sent.unshift(turn);
  }
  while (sent.length && sent[0].role !== "user") sent.shift();
  return sent;
}

// Says on the page which turns go with the next question, once some are left out.
function showWindow() {
  const sent = windowOf(history).length;
  const firstSent = history.length - sent; // index of the first turn sent
  document.querySelectorAll("#thread .turn").forEach((turn) => {
    turn.classList.toggle("outside", Number(turn.dataset.turn) * 2 < firstSent);
  });
  const note = $("window-note");
  note.hidden = firstSent === 0;
  if (!note.hidden) {
    const questions = Math.ceil(sent / 2);
    note.textContent = `Follow-ups are read with the last ${questions} question${questions === 1 ? "" : "s"} and answers; ` +
      "the earlier turns (dimmed) stay on the page but are no longer sent.";
  }
}

function progress(text) {
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  $("progress").append(el("li", {}, el("span", { class: "time" }, `+${seconds} s`), text));
}

function showError(message) {
  $("error").textContent = shown(message);
  $("error").hidden = false;
}

// A run of citation markers, by the server's rule (typedrag/citations.py): one that follows a word or a bracket
// ("pipes[2]", "a[0]") is text, not a citation.
const MARKER_RUN = /(?<![\p{L}\p{N}_\]])[ \t]?\[\d{1,3}\](?:[ \t]?\[\d{1,3}\])*/gu;

// Text with its [n] citations of the sources in `numbers` turned into links to source n of `sources` (a turn's
// listed sources); any other [n] stays text.
function cited(text, numbers, sources = book) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const run of text.matchAll(MARKER_RUN)) {
    for (const marker of run[0].matchAll(/\[(\d{1,3})\]/g)) {
      const n = Number(marker[1]);
      if (!numbers.has(n) || !sources.byNumber.has(n)) continue;
      const at = run.index + marker.index;
      frag.append(shown(text.slice(last, at)), citeLink(n, sources));
      last = at + marker[0].length;
    }
  }
  frag.append(shown(text.slice(last)));
  return frag;
}

// A citation links to its source's original (the viewer, at the passage, highlighted): a click shows it beside the
// answer and marks the source's card; a middle click or a new tab opens the viewer itself.
function citeLink(n, sources = book) {
  const named = sources.byNumber.get(n);
  const id = `${sources.prefix}source-${n}`;
  const link = el("a", { class: "cite", href: named?.link || `#${id}`, "data-source": String(n), title: named ? sourceName(named) : `source ${n}` }, `[${n}]`);
  link.addEventListener("click", (event) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return; // the browser opens the link
    event.preventDefault();
    if (named?.link) openViewer(named.link);
    const target = $(id);
    const folded = target.closest("details");
    if (folded) folded.open = true; // an earlier turn's sources are folded under it
    document.querySelectorAll(".sources li.highlight").forEach((li) => li.classList.remove("highlight"));
    target.classList.add("highlight");
    // After the browser's own scroll to the link's #anchor and any layout change settle.
    requestAnimationFrame(() => requestAnimationFrame(() => target.scrollIntoView({ behavior: "smooth", block: "center" })));
  });
  return link;
}

function summary(value) {
  if (Array.isArray(value)) return value.map(summary).join(", ");
  if (value && typeof value === "object") return Object.values(value).map(summary).join(": ");
  return String(value);
}

// "Title › Section, p. 12" (or "pp. 12–13"), as the command line names a source.
function sourceName(s) {
  let name = [s.title, s.section].filter(Boolean).join(" › ");
  if (s.page != null) {
    const pages = s.page_end != null ? `pp. ${s.page}–${s.page_end}` : `p. ${s.page}`;
    name = name ? `${name}, ${pages}` : pages;
  }
  return name;
}

// The sources an answer lists: those it cites; when it cites none (an abstention's nearest passages), the first
// few. The other passages it was given are in the details view, as `typedrag ask` lists them under --trace.
function listed(r) {
  const numbers = new Set(r.citations.flatMap((c) => c.source_numbers));
  const chosen = r.sources.filter((s) => numbers.has(s.number));
  return chosen.length ? chosen : r.sources.slice(0, LISTED);
}

function sourceItems(sources, prefix) {
  return sources.map((s) => {
    const open = s.link ? [el("a", { class: "open-source", href: s.link, target: "_blank", rel: "noopener" }, "Open the original")] : [];
    if (open.length) {
      open[0].addEventListener("click", (event) => {
        if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
        event.preventDefault();
        openViewer(s.link);
      });
    }
    return el("li", { id: `${prefix}source-${s.number}` },
      el("div", { class: "source-head" },
        el("span", { class: "num" }, `[${s.number}]`),
        el("span", { class: "title" }, sourceName(s)),
        el("span", { class: "source-id" }, s.passage_id), ...open),
      el("p", { class: "source-text" }, s.text));
  });
}

// The viewer beside the answer: the original document at the passage (same page, so it reads the same key).
function openViewer(link) {
  $("viewer-frame").src = link;
  $("viewer-tab").href = link;
  $("viewer-panel").hidden = false;
}

function renderSources(r) {
  const sources = listed(r);
  book = { prefix: "", byNumber: new Map(sources.map((s) => [s.number, s])) };
  $("sources-title").textContent = r.abstained ? "Nearest passages, not an answer" : "Sources";
  $("sources").replaceChildren(...sourceItems(sources, ""));
  if (!sources.length) $("sources").append(el("li", { class: "muted" }, "no passages were used"));
}

// Whether an LLM wrote any of it: the offline engine's steps are recorded as steps, never as LLM calls.
function usedLLM(r) {
  return r.llm_calls.length > 0;
}

function item(key, ...value) {
  return el("li", {}, el("span", { class: "key" }, key), ...value);
}

function renderTrace(r) {
  const root = el("ul");
  if (r.rewrite) {
    const how = r.rewrite.rewritten ? `rewritten by ${r.rewrite.by}` : `stands alone (${r.rewrite.by})`;
    root.append(item("conversation", `${r.rewrite.history_turns} earlier turns · ${how}`,
      el("ul", {}, item("read as", r.standalone_question), item("searched", r.searched.join(" | ")))));
  }
  if (r.instructions) root.append(item("instructions", r.instructions));
  if (r.abstention) {
    const a = r.abstention;
    const score = a.score != null && a.bar != null ? ` (${a.score.toFixed(2)} below ${a.bar.toFixed(2)})` : "";
    root.append(item("abstained", el("span", { class: "bad" }, `${a.by}: ${a.reason}${score}`)));
  }
  if (r.type) {
    const probs = Object.entries(r.type.probabilities).sort((a, b) => b[1] - a[1]).slice(0, 3)
      .map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ");
    root.append(item("type", `${r.type.type} · confidence ${r.type.confidence.toFixed(2)} · ${r.type.source}`,
      el("ul", {}, el("li", { class: "muted" }, probs))));
  }
  root.append(item("strategy", r.strategy));
  if (r.knowledge === "labelled") {
    const u = r.unsourced;
    root.append(item("knowledge", u ? `labelled: ${u.sentences.length} sentence${u.sentences.length === 1 ? "" : "s"} by ${u.by}` +
      (u.covers ? ` for what the documents do not cover: ${u.covers}` : "") : "labelled: nothing added"));
  }
  if (r.plan) {
    root.append(item("plan", el("ul", {}, ...Object.entries(r.plan).map(([k, v]) =>
      Array.isArray(v) ? item(k, el("ul", {}, ...v.map((x) => el("li", {}, summary(x))))) : item(k, summary(v))))));
  }
  if (r.aspects.length) {
    root.append(item("aspects", el("ul", {}, ...r.aspects.map((a) => {
      const refs = a.source_numbers.filter((n) => book.byNumber.has(n)).map((n) => citeLink(n));
      const query = a.query === a.label ? "" : el("span", { class: "muted" }, `query: ${a.query} `);
      const body = a.error ? el("div", { class: "bad" }, `dropped: ${a.error}`)
        : el("div", { class: "aspect-answer" }, cited(a.answer, new Set(a.source_numbers)));
      return item(a.label, query, ...refs, a.answer || a.error ? body : "");
    }))));
  }
  const cites = new Set(listed(r).map((s) => s.number));
  const others = r.sources.filter((s) => !cites.has(s.number));
  if (others.length) {
    root.append(item("passages not cited", el("ul", {}, ...others.map((s) =>
      el("li", {}, el("span", { class: "muted" }, `[${s.number}] `), sourceName(s) || s.passage_id)))));
  }
  if (r.fallbacks.length) {
    root.append(item("notes", el("ul", {}, ...r.fallbacks.map((f) => el("li", { class: "note" }, `${f.step}: ${f.reason}`)))));
  }
  const e = r.engines;
  root.append(item("engines", [e.generator, e.retriever, e.classifier, e.reranker].filter(Boolean).join(" · ")));
  if (usedLLM(r)) {
    root.append(item("LLM calls", `${r.usage.calls} (${r.usage.cached_calls} cached) · tokens ${r.usage.prompt_tokens}+${r.usage.completion_tokens}`));
  } else {
    root.append(item("steps", `${r.steps.length}, by the offline engine (no LLM)`));
  }
  $("trace").replaceChildren(root);
  $("details-summary").textContent = r.fallbacks.length
    ? `Details: type, plan, trace and ${r.fallbacks.length} note${r.fallbacks.length === 1 ? "" : "s"}`
    : "Details: type, plan and trace";
}

// What the model added from its own knowledge (knowledge = labelled): apart from the answer, never cited.
function showUnsourced(unsourced) {
  const some = Boolean(unsourced && unsourced.sentences.length);
  $("unsourced").hidden = !some;
  $("unsourced-text").textContent = some ? shown(unsourced.sentences.join(" ")) : "";
}

function renderResult(r) {
  renderSources(r);
  $("answer").replaceChildren(cited(r.answer, new Set(r.citations.flatMap((c) => c.source_numbers))));
  showUnsourced(r.unsourced);
  const readAs = r.rewrite && r.rewrite.rewritten ? [el("p", { class: "read-as-line" }, `Read as: ${r.standalone_question}`)] : [];
  const pills = r.collection ? [`collection ${r.collection}`, `method ${r.method}`] : [`method ${r.method}`];
  if (r.type) pills.push(`type ${r.type.type.toLowerCase()}`);
  if (!r.type || r.strategy !== r.type.type.toLowerCase()) pills.push(`strategy ${r.strategy}`);
  $("meta").replaceChildren(...pills.map((p) => el("span", { class: "pill" }, p)),
    ...(r.abstained ? [el("span", { class: "pill none" }, "the documents do not answer")] : []), ...readAs);
  renderTrace(r);
}

// The answer's text as it is written: plain text until the result turns its [n] into links.
let written = null;

function writeToken(text) {
  if (written === null) {
    written = document.createTextNode("");
    $("answer").replaceChildren(written);
    progress("Writing the answer");
  }
  written.appendData(shown(text));
}

const handlers = {
  rewrite: (d) => progress(d.rewritten ? `Read as: ${d.standalone_question}` : "Stands alone: not rewritten"),
  abstained: (d) => progress(`The documents do not answer: ${d.reason}`),
  token: (d) => writeToken(d.text),
  unsourced: (d) => {
    showUnsourced(d);
    progress("Added from the model's own knowledge, apart");
  },
  restart: (d) => {
    written = null;
    $("answer").replaceChildren(el("span", { class: "muted" }, "working…"));
    progress(`Started over: ${d.reason}`);
  },
  type: (d) => progress(`Type decided: ${d.type} (confidence ${d.confidence.toFixed(2)}, ${d.source})`),
  plan: (d) => progress(`Plan made: ${summary(d.plan)}`),
  aspect: (d) => progress(d.aspect.error ? `Aspect dropped: ${d.aspect.label}` : `Aspect done: ${d.aspect.label}`),
  sources: (d) => progress(`${d.count} source passage${d.count === 1 ? "" : "s"} gathered`),
  answer: () => progress("Answer written"),
  saved: (d) => {
    if (current) current.messageId = d.answer;
    $("feedback").replaceChildren(feedbackBar(d.answer, null, current?.result));
    chats.current = d.conversation;
    showConversationActions();
    location.hash = `c=${d.conversation.id}`;
    loadConversations().catch((e) => showError(e.message));
  },
  result: (r) => {
    $("feedback").replaceChildren();
    renderResult(r);
    history.push({ role: "user", content: r.question }, { role: "assistant", content: r.answer });
    current = { question: r.question, result: r };
    $("start-over").hidden = false;
    $("question").placeholder = "Ask a follow-up question, or start over";
    progress(usedLLM(r) ? `Done · ${r.usage.calls} LLM call${r.usage.calls === 1 ? "" : "s"}` : "Done");
    showWindow();
  },
  error: (d) => showError(`Error ${d.status}: ${d.message}`),
};

function dispatch(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (data.length && handlers[event]) handlers[event](JSON.parse(data.join("\n")));
}

// The answered turn shown in full moves up into the thread: its question, how it was read, its answer with its
// citations still linked to its own sources, listed under it (ids of their own: turn k's source n is tk-source-n).
function keepInThread() {
  if (current === null) return;
  const r = current.result;
  const number = turnsKept++;
  const sources = listed(r);
  const own = { prefix: `t${number}-`, byNumber: new Map(sources.map((s) => [s.number, s])) };
  const readAs = r.rewrite && r.rewrite.rewritten ? [el("p", { class: "read-as" }, `read as: ${r.standalone_question}`)] : [];
  const badge = r.abstained ? [el("span", { class: "pill none" }, "the documents do not answer")] : [];
  const said = el("p", { class: "said" });
  said.append(cited(r.answer, new Set(r.citations.flatMap((c) => c.source_numbers)), own));
  const unsourced = r.unsourced && r.unsourced.sentences.length
    ? [el("aside", { class: "unsourced" }, el("h3", {}, "Not from your documents"), el("p", {}, r.unsourced.sentences.join(" ")))]
    : [];
  const listing = sources.length
    ? [el("details", { class: "turn-sources" },
        el("summary", {}, `${r.abstained ? "Nearest passages" : "Sources"} (${sources.length})`),
        el("ol", { class: "sources" }, ...sourceItems(sources, own.prefix)))]
    : [];
  const verdict = current.messageId ? [feedbackBar(current.messageId, current.feedback || null, r)] : [];
  const turn = el("article", { class: "turn" }, el("p", { class: "asked" }, current.question), ...readAs, ...badge, said, ...unsourced, ...verdict, ...listing);
  turn.dataset.turn = String(number);
  $("thread").append(turn);
  $("thread").hidden = false;
  current = null;
}

function startOver() {
  chats.current = null;
  showConversationActions();
  if (location.hash) history_replace();
  $("feedback").replaceChildren();
  $("viewer-panel").hidden = true;
  history = [];
  current = null;
  turnsKept = 0;
  $("thread").replaceChildren();
  $("thread").hidden = true;
  $("window-note").hidden = true;
  $("output").hidden = true;
  $("error").hidden = true;
  $("start-over").hidden = true;
  $("question").placeholder = "Ask a question, e.g. What is the difference between a crocodile and an alligator?";
  $("question").focus();
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  keepInThread();
  $("question").value = "";
  $("error").hidden = true;
  $("output").hidden = false;
  $("progress").replaceChildren();
  $("sources").replaceChildren();
  $("meta").replaceChildren();
  $("answer").replaceChildren(el("span", { class: "muted" }, "working…"));
  showUnsourced(null);
  written = null;
  $("trace").replaceChildren(el("span", { class: "muted" }, "appears when the answer is ready"));
  $("submit").disabled = true;
  started = performance.now();
  const headers = { "Content-Type": "application/json", ...authHeaders() };
  let path = "/v1/answer/stream";
  const body = { question, method: $("method").value, type: $("type").value || null, knowledge: $("knowledge").value };
  try {
    if (account.conversations) {
      // A saved conversation: the server reads the question against the conversation's own history, and keeps both.
      if (!chats.current) {
        chats.current = await api("/v1/conversations", { method: "POST", headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ collection: library.current }) });
      }
      path = `/v1/conversations/${encodeURIComponent(chats.current.id)}/answer/stream`;
    } else {
      body.history = windowOf(history);
      if (library.current) body.collection = library.current;
    }
    const response = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      if (response.status === 401) needSignIn();
      showError(`Error ${response.status}: ${problem.error?.message || response.statusText}`);
      $("question").value = question; // nothing was answered: the question stays to be edited
      $("output").hidden = true;
      return;
    }
    progress("Question sent");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        dispatch(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
      }
    }
  } catch (error) {
    showError(`Connection failed: ${error.message}`);
  } finally {
    $("submit").disabled = false;
  }
}

$("ask").addEventListener("submit", ask);
$("start-over").addEventListener("click", startOver);
$("question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("ask").requestSubmit();
  }
});

$("viewer-close").addEventListener("click", () => { $("viewer-panel").hidden = true; $("viewer-frame").removeAttribute("src"); });

// --- collections: choose one, create and delete them, upload documents and watch them ingested ----------------

const library = { current: null, collections: [], writable: false, mayWrite: new Set(), limits: null, polling: null };

// A server with a store: the session cookie (sent by the browser) and, on a write, its CSRF token. Without one: the
// key typed in the key box, as a Bearer key.
function authHeaders() {
  const headers = {};
  const key = keyInput.value.trim();
  if (key && !account.sessions) headers.Authorization = `Bearer ${key}`;
  if (account.csrf) headers["X-CSRF-Token"] = account.csrf;
  return headers;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: { ...authHeaders(), ...(options.headers || {}) } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok && !(response.status === 422 && body.rejected)) {
    if (response.status === 401) needSignIn();
    throw new Error(`${response.status}: ${body.error?.message || response.statusText}`);
  }
  return body;
}

const collectionURL = (name) => `/v1/collections/${encodeURIComponent(name)}`;

function size(bytes) {
  return bytes >= 1 << 20 ? `${(bytes / (1 << 20)).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
}

function progressLine(info) {
  const p = info.progress;
  if (!p) return info.state === "queued" ? "waiting to be ingested" : "";
  const left = p.seconds_left != null ? ` · about ${p.seconds_left >= 90 ? `${Math.round(p.seconds_left / 60)} min` : `${Math.round(p.seconds_left)} s`} left` : "";
  if (p.phase === "embedding") return `embedding: ${p.vectors_done} of ${p.vectors_total} passages${left}`;
  if (p.phase === "reading") return `reading: ${p.files_done} of ${p.files_total} files, ${p.passages} passages${left}`;
  if (p.phase === "writing") return `writing the index: ${p.passages} passages`;
  return "looking for changes";
}

function renderCollection(info, documents) {
  $("collection-state").textContent = info.state;
  $("collection-state").className = `pill state-${info.state}`;
  $("collection-counts").textContent = `${info.files} file${info.files === 1 ? "" : "s"} · ${info.passages} passages` +
    (info.retriever ? ` · ${info.retriever}` : "");
  const canWrite = !info.read_only && library.mayWrite.has(info.name); // an editor's grant, or an admin
  $("read-only").hidden = !info.read_only;
  $("dropzone").hidden = !canWrite;
  $("delete-collection").hidden = info.read_only || !library.writable;
  const busy = info.state === "ingesting" || info.state === "queued";
  $("ingestion").hidden = !busy;
  if (busy) {
    const p = info.progress;
    const bar = $("ingest-bar");
    if (p && p.phase === "embedding" && p.vectors_total) { bar.max = p.vectors_total; bar.value = p.vectors_done; }
    else if (p && p.phase === "reading" && p.files_total) { bar.max = p.files_total; bar.value = p.files_done; }
    else bar.removeAttribute("value");
    $("ingest-line").textContent = progressLine(info);
  }
  $("documents").hidden = info.read_only || !documents.length;
  $("documents").querySelector("tbody").replaceChildren(...documents.map((d) => {
    const problems = d.problems.map((p) => el("div", { class: "problem" }, p));
    const name = d.link ? el("a", { href: d.link, target: "_blank", rel: "noopener" }, d.name) : el("span", {}, d.name);
    const remove = el("button", { type: "button", class: "secondary remove", "data-name": d.name }, "Delete");
    remove.addEventListener("click", () => removeDocument(d.name).catch((e) => showError(e.message)));
    const row = el("tr", { "data-name": d.name },
      el("td", {}, name, el("span", { class: "muted" }, ` ${d.size != null ? size(d.size) : ""}`)),
      el("td", { class: `status status-${d.status}` }, d.status, ...problems),
      el("td", {}, String(d.passages)),
      el("td", {}, ...(d.status === "removing" || !canWrite ? [] : [remove])));
    return row;
  }));
  const unsettled = busy || documents.some((d) => ["queued", "indexing", "removing"].includes(d.status));
  clearTimeout(library.polling);
  if (unsettled) library.polling = setTimeout(() => showCollection().catch((e) => showError(e.message)), 1000);
  document.body.dataset.collectionState = unsettled ? "busy" : info.state;
}

async function showCollection() {
  if (!library.current) return;
  const name = library.current;
  const listing = await api(`${collectionURL(name)}/documents`);
  if (name !== library.current) return; // switched meanwhile
  renderCollection(listing.collection, listing.documents);
}

async function loadCollections(choose) {
  const listing = await api("/v1/collections");
  library.collections = listing.collections.map((c) => c.name);
  library.writable = listing.writable;
  library.mayWrite = new Set(listing.collections.filter((c) => c.may_write !== false).map((c) => c.name));
  library.limits = listing.limits;
  const select = $("collection");
  select.replaceChildren(...library.collections.map((name) => el("option", { value: name }, name)));
  library.current = choose && library.collections.includes(choose) ? choose
    : library.collections.includes(library.current) ? library.current : (listing.default || library.collections[0] || null);
  if (library.current) select.value = library.current;
  $("library").hidden = !library.writable && library.collections.length === 0;
  $("new-collection-box").hidden = !library.writable;
  $("new-collection-box").open = library.writable && library.collections.length === 0;
  $("accepted-types").textContent = listing.limits ? `(${listing.limits.upload_types.join(" ")}; up to ${size(listing.limits.max_file_bytes)} each)` : "";
  select.disabled = library.collections.length === 0;
  if (!library.current) {
    for (const id of ["dropzone", "documents", "ingestion", "delete-collection", "read-only"]) $(id).hidden = true;
    $("collection-state").textContent = "no collection yet";
    $("collection-state").className = "pill";
    $("collection-counts").textContent = "";
    return;
  }
  await showCollection();
}

async function upload(files) {
  if (!files.length || !library.current) return;
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  const sending = el("li", { class: "muted" }, `uploading ${files.length} file${files.length === 1 ? "" : "s"}…`);
  $("upload-result").prepend(sending); // each upload's outcome stays listed, newest first
  $("upload-result").hidden = false;
  try {
    const result = await api(`${collectionURL(library.current)}/documents`, { method: "POST", body: form });
    sending.replaceWith(
      ...result.accepted.map((a) => el("li", {}, `${a.name}: ${a.replaced ? "replaced" : "added"}, being ingested`)),
      ...result.rejected.map((r) => el("li", { class: "bad rejected" }, `${r.name}: ${r.reason}`)));
  } catch (error) {
    sending.remove();
    throw error;
  }
  await showCollection();
}

async function removeDocument(name) {
  await api(`${collectionURL(library.current)}/documents/${encodeURIComponent(name)}`, { method: "DELETE" });
  await showCollection();
}

$("collection").addEventListener("change", () => {
  library.current = $("collection").value;
  startOver();
  $("upload-result").replaceChildren();
  $("upload-result").hidden = true;
  showCollection().catch((e) => showError(e.message));
});
$("new-collection").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("new-name").value.trim();
  try {
    await api("/v1/collections", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name, retrieval: $("new-retrieval").value || null }) });
    $("new-name").value = "";
    $("new-collection-box").open = false;
    startOver();
    await loadCollections(name);
  } catch (error) {
    showError(error.message);
  }
});
$("delete-collection").addEventListener("click", async () => {
  const name = library.current;
  if (!name || !confirm(`Delete the collection ${name} and every document in it?`)) return;
  try {
    await api(collectionURL(name), { method: "DELETE" });
    library.current = null;
    startOver();
    await loadCollections();
  } catch (error) {
    showError(error.message);
  }
});
$("files").addEventListener("change", () => {
  const files = [...$("files").files];
  $("files").value = "";
  upload(files).catch((e) => showError(e.message));
});
const zone = $("dropzone");
zone.addEventListener("dragover", (event) => { event.preventDefault(); zone.classList.add("over"); });
zone.addEventListener("dragleave", () => zone.classList.remove("over"));
zone.addEventListener("drop", (event) => {
  event.preventDefault();
  zone.classList.remove("over");
  upload([...event.dataTransfer.files]).catch((e) => showError(e.message));
});
keyInput.addEventListener("change", () => start().catch((e) => showError(e.message)));

// --- accounts: sign in with a key, sign out ----------------------------------------------------------------

const account = { sessions: false, csrf: null, conversations: false, user: null };

function applySession(s) {
  account.sessions = Boolean(s.sessions);
  account.csrf = s.csrf || null;
  account.conversations = Boolean(s.conversations);
  account.user = s.user || null;
  $("key-box").hidden = account.sessions; // with sessions the page keeps a cookie, never a key
  $("account").hidden = !s.signed_in;
  $("sign-out").hidden = !(s.signed_in && s.how === "session");
  $("signed-in-as").textContent = s.signed_in
    ? shown(`Signed in as ${s.user || "the server's key"} (${s.role})${s.how === "header" ? " by your single sign-on" : ""}`) : "";
  $("conversations").hidden = !account.conversations;
}

function needSignIn() {
  if (account.sessions) {
    $("sign-in").hidden = false;
    $("sign-in-key").focus();
  } else {
    $("key-box").open = true;
  }
}

// Ask is enabled once the session and the collections are known (a question asked before would name no collection
// and no conversation); whatever happens, start() leaves it enabled.
async function start() {
  try {
    await starting();
  } finally {
    $("submit").disabled = false;
  }
}

async function starting() {
  const response = await fetch("/v1/session", { headers: authHeaders() });
  const s = await response.json().catch(() => ({}));
  applySession(s);
  const locked = Boolean(s.sign_in_required && s.sessions);
  $("sign-in").hidden = !locked;
  $("ask").hidden = locked;
  if (locked) {
    $("library").hidden = true;
    $("sign-in-key").focus();
    return;
  }
  if (s.sign_in_required) $("key-box").open = true;
  await loadCollections();
  if (account.conversations) {
    await loadConversations();
    const wanted = location.hash.match(/^#c=([0-9a-f]{32})$/);
    if (wanted) await reopen(wanted[1]);
  }
}

$("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("sign-in-key").value.trim();
  const response = await fetch("/v1/session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ key }) });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    showError(`Sign-in failed: ${body.error?.message || response.statusText}`);
    return;
  }
  $("sign-in-key").value = "";
  $("error").hidden = true;
  await start();
});

$("sign-out").addEventListener("click", async () => {
  await fetch("/v1/session", { method: "DELETE", headers: authHeaders() });
  location.hash = "";
  location.reload();
});

// --- saved conversations: list, search, reopen, rename, delete, export ---------------------------------------

const chats = { current: null, cursor: null, searching: null };

function history_replace() {
  window.history.replaceState(null, "", location.pathname + location.search);
}

function showConversationActions() {
  const c = chats.current;
  $("conversation-actions").hidden = !c;
  document.querySelectorAll("#conversation-list li").forEach((li) => li.classList.toggle("current", Boolean(c) && li.dataset.id === c.id));
  if (!c) return;
  const base = `/v1/conversations/${encodeURIComponent(c.id)}/export`;
  $("export-markdown").href = `${base}?format=markdown`;
  $("export-json").href = `${base}?format=json`;
}

function conversationItem(c) {
  const open = el("button", { type: "button", title: c.title || "untitled" }, c.title || "untitled",
    el("span", { class: "when" }, `${c.collection} · ${c.updated_at.slice(0, 16).replace("T", " ")}`));
  open.addEventListener("click", () => reopen(c.id).catch((e) => showError(e.message)));
  const li = el("li", { "data-id": c.id }, open);
  return li;
}

async function loadConversations(more = false) {
  if (!account.conversations) return;
  const query = new URLSearchParams({ limit: "30" });
  const search = $("conversation-search").value.trim();
  if (search) query.set("search", search);
  if (more && chats.cursor) query.set("cursor", chats.cursor);
  const page = await api(`/v1/conversations?${query}`);
  const items = page.conversations.map(conversationItem);
  if (more) $("conversation-list").append(...items);
  else $("conversation-list").replaceChildren(...items);
  if (!more && !items.length) $("conversation-list").append(el("li", { class: "muted" }, search ? "nothing found" : "none yet: ask a question"));
  chats.cursor = page.next_cursor;
  $("more-conversations").hidden = !page.next_cursor;
  showConversationActions();
}

// A saved conversation shown again: each question and answer as it was, the last in full, every verdict given;
// the next question is a follow-up in it, read against its history by the server.
async function reopen(id) {
  const saved = await api(`/v1/conversations/${encodeURIComponent(id)}`);
  const conversation = saved.conversation;
  if (conversation.collection !== library.current && library.collections.includes(conversation.collection)) {
    library.current = conversation.collection;
    $("collection").value = conversation.collection;
    await showCollection();
  }
  startOver();
  chats.current = conversation;
  const pairs = [];
  for (let i = 0; i < saved.messages.length; i++) {
    const m = saved.messages[i];
    const next = saved.messages[i + 1];
    if (m.role === "user" && next && next.role === "assistant" && next.result) {
      pairs.push({ question: m.text, result: next.result, messageId: next.id, feedback: next.feedback });
      i++;
    }
  }
  pairs.forEach((pair, n) => {
    history.push({ role: "user", content: pair.question }, { role: "assistant", content: pair.result.answer });
    current = pair;
    if (n < pairs.length - 1) keepInThread();
  });
  if (current) {
    $("output").hidden = false;
    $("progress").replaceChildren();
    started = performance.now();
    progress(`Reopened: ${pairs.length} question${pairs.length === 1 ? "" : "s"} and answer${pairs.length === 1 ? "" : "s"}`);
    renderResult(current.result);
    $("feedback").replaceChildren(feedbackBar(current.messageId, current.feedback, current.result));
    $("start-over").hidden = false;
    $("question").placeholder = "Ask a follow-up question, or start over";
    showWindow();
  }
  location.hash = `c=${conversation.id}`;
  showConversationActions();
}

$("new-conversation").addEventListener("click", startOver);
$("more-conversations").addEventListener("click", () => loadConversations(true).catch((e) => showError(e.message)));
let searchTimer = null;
$("conversation-search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => loadConversations().catch((e) => showError(e.message)), 250);
});
$("rename-conversation").addEventListener("click", async () => {
  const c = chats.current;
  const title = c && prompt("A new title for this conversation", c.title);
  if (!title || !title.trim()) return;
  try {
    chats.current = await api(`/v1/conversations/${encodeURIComponent(c.id)}`, { method: "PATCH",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ title: title.trim() }) });
    await loadConversations();
  } catch (error) {
    showError(error.message);
  }
});
$("delete-conversation").addEventListener("click", async () => {
  const c = chats.current;
  if (!c || !confirm(`Delete the conversation "${c.title || "untitled"}"?`)) return;
  try {
    await api(`/v1/conversations/${encodeURIComponent(c.id)}`, { method: "DELETE" });
    startOver();
    await loadConversations();
  } catch (error) {
    showError(error.message);
  }
});

// --- feedback: thumbs up or down, with an optional comment, on every saved answer -----------------------------

// Under the verdict, the answer's listed sources, each to tick when it helped: `typedrag eval export-feedback` writes
// them as the question's relevant passages.
function feedbackBar(messageId, given, result) {
  const up = el("button", { type: "button", class: "thumb", "data-verdict": "up", "aria-pressed": String(given?.verdict === "up") }, "\u{1F44D} Helpful");
  const down = el("button", { type: "button", class: "thumb", "data-verdict": "down", "aria-pressed": String(given?.verdict === "down") }, "\u{1F44E} Not helpful");
  const comment = el("input", { type: "text", class: "comment", maxlength: "4000", placeholder: "Comment (optional)", "aria-label": "Comment on this answer" });
  comment.value = given?.comment || "";
  const note = el("span", { class: "saved-note", role: "status" }, given ? "feedback saved" : "");
  let verdict = given?.verdict || null;
  const marked = new Set(given?.helpful || []);
  const helped = (result ? listed(result) : []).map((source) => {
    const box = el("input", { type: "checkbox", class: "helped", "data-passage": source.passage_id });
    box.checked = marked.has(source.passage_id);
    box.addEventListener("change", () => { if (verdict) send(verdict); });
    return el("label", { class: "helped-label", title: sourceName(source) || source.passage_id }, box, ` [${source.number}] helped`);
  });
  async function send(chosen) {
    verdict = chosen;
    const helpful = helped.map((label) => label.querySelector("input")).filter((box) => box.checked).map((box) => box.dataset.passage);
    try {
      await api(`/v1/messages/${messageId}/feedback`, { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ verdict, comment: comment.value.trim(), helpful }) });
      up.setAttribute("aria-pressed", String(verdict === "up"));
      down.setAttribute("aria-pressed", String(verdict === "down"));
      note.textContent = "feedback saved";
    } catch (error) {
      note.textContent = `not saved: ${error.message}`;
    }
  }
  up.addEventListener("click", () => send("up"));
  down.addEventListener("click", () => send("down"));
  comment.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      if (verdict) send(verdict);
      else note.textContent = "choose helpful or not helpful first";
    }
  });
  return el("div", { class: "feedback-bar", "data-message": String(messageId) }, up, down, comment, note, ...helped);
}

start().catch((e) => showError(e.message));

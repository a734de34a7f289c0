// The search page: a plain client of the public HTTP API, and an example of one.
//
// Every search is one `POST /v2` with `Authorization: Bearer <search-only key>` and a JSON body as
// in the contract (§3). Key and collection come from the URL fragment,
// `#key=<search key>&collection=movies` (a fragment never reaches any server's logs); a tenant token
// (docs/security.md) is taken there like a key, as is any bearer credential; the query
// rides there too (`&q=`), so a reload or a shared link keeps it.
//
// Hybrid search: when the collection's settings declare a vector space and the page has an embedding
// hook (`window.roarsearchEmbed`, set by `embed.js`, any script, or the console), a search with
// words also sends the query's vector and a semantic ratio (docs/vectors.md, "Hybrid search on the
// search page"). Without either, the page sends exactly what it always did.
//
// Safety rule: record text only ever reaches the DOM through `textContent`. The one exception is
// the engine's `_highlights` strings, which the engine has already escaped and only adds `<em>` to.
"use strict";

const PAGE_SIZE = 10;
const DEBOUNCE_MS = 120;
// When a collection's settings give no `searchPage`, the page guesses from the data: these bound
// how much it shows.
const GUESSED = { textFacets: 4, numericFacets: 3, facts: 4, lines: 2, sorts: 3, facetProbe: 20 };
const TITLE_NAMES = ["title", "name", "label", "heading", "subject", "headline"];
const COORDINATE_NAMES = ["lat", "lng", "lon", "long", "latitude", "longitude"];
// Hybrid search: the weight of the vector order when the address gives none (the engine's default
// too), how long the embedding hook may take before the page searches by words alone (a model
// loading in the browser can take seconds; a hook that never answers must not leave the page
// busy), and how many query embeddings the page keeps (a change of ratio, facet, sort or page
// reuses the query's vector instead of calling the hook again).
const DEFAULT_RATIO = 0.5;
const EMBED_TIMEOUT_MS = 10000;
const EMBED_CACHE_SIZE = 50;
const SCORE_LABELS = { cosine: "Similarity", dot: "Dot product", l2: "Distance" };

const fragment = new URLSearchParams(location.hash.slice(1));
const KEY = (fragment.get("key") || "").trim();  // a search key or a tenant token (a JWT: base64url and dots)
let COLLECTION = fragment.get("collection") || "";
// How this collection is shown: its settings' `searchPage`, completed by guesses (see `pageConfig`).
let CONFIG = null;
// The collection's vector spaces, `[{name, dimensions, metric}]` in the settings' order; null while
// unknown (a credential that cannot read settings: learnt from records once a hook appears).
let SPACES = [];

const state = {
  query: fragment.get("q") || "",
  sort: fragment.get("sort") || "",
  skip: 0,
  text: {},      // field -> chosen values (any of them: OR within a field, AND across fields)
  numeric: {},   // field -> chosen interval strings
  space: fragment.get("space") || "",           // the chosen vector space ("" : the first declared)
  ratio: ratioFrom(fragment.get("ratio")),      // the semantic ratio of hybrid searches
};

/** A semantic ratio from the address: 0..1 in the slider's steps of 0.1, else the default. */
function ratioFrom(text) {
  const value = Number(text);
  if (text === null || text.trim() === "" || !Number.isFinite(value) || value < 0 || value > 1) return DEFAULT_RATIO;
  return Math.round(value * 10) / 10;
}

const $ = (id) => document.getElementById(id);

/** An element with attributes and children; strings become text nodes, never HTML. */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === false || value == null) continue;
    if (name === "className") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An element holding an engine highlight (already escaped, `<em>` added) or, without one, plain text. */
function marked(tag, highlight, plain) {
  const node = el(tag);
  if (typeof highlight === "string") node.innerHTML = highlight;
  else node.textContent = plain == null ? "" : String(plain);
  return node;
}

function requestBody() {
  const body = {
    collection: COLLECTION,
    query: state.query,
    skip: state.skip,
    count: PAGE_SIZE,
    fields: CONFIG.fields,
    highlightFields: CONFIG.highlightFields,
    textFacets: CONFIG.textFacets.map((facet) => facet.field),
    facetCount: 8,
    textFacetFilters: state.text,
    numericFacets: Object.fromEntries(CONFIG.numericFacets.map((facet) => [facet.field, facet.ranges.map((range) => range.range)])),
    numericFacetFilters: state.numeric,
  };
  if (state.sort) body.sort = [state.sort];
  return body;
}

/** One API call: `{response, data}`, or a thrown Error whose message a person can act on. */
async function api(path, body) {
  let response;
  try {
    response = await fetch(path, {
      method: body === undefined ? "GET" : "POST",
      headers: { "Content-Type": "application/json", "Authorization": `Bearer ${KEY}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (failure) {
    throw new Error(`Cannot reach the server (${failure.message}). Is roarsearch still running?`);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok || data === null) {
    const failure = new Error(describeError(response, data));
    failure.status = String(response.status);  // for callers that can do without this route
    throw failure;
  }
  return data;
}

/** "tomatoMeter" -> "Tomato meter", "address.city" -> "Address city": a label for a guessed field. */
function humanize(field) {
  const words = field.replace(/[._-]+/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").trim().toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** A round step (1, 2 or 5 times a power of ten) near `span / buckets`. */
function niceStep(span, buckets) {
  const raw = span / buckets;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((factor) => factor * power).find((step) => step >= raw) || raw;
}

/** About five intervals of round bounds covering [min, max], labelled for a person. */
function guessRanges(stats) {
  const { min, max } = stats;
  if (min == null || max == null) return [];
  if (min === max) return [{ range: `[${min},${max}]`, label: formatNumber(min) }];
  if (min >= 0 && max / Math.max(min, 1) >= 100) {
    // Spread over orders of magnitude (populations, prices): one range per power of ten.
    const top = Math.ceil(Math.log10(max + 1));
    const bottom = Math.max(Math.floor(Math.log10(Math.max(min, 1))), top - 7);
    const ranges = [];
    for (let power = bottom; power < top; power += 1) {
      const low = power === bottom ? 0 : 10 ** power;
      ranges.push({ range: `[${low},${10 ** (power + 1)})`, label: `${formatNumber(low)} – ${formatNumber(10 ** (power + 1))}` });
    }
    return ranges.reverse();
  }
  const step = niceStep(max - min, 5);
  const ranges = [];
  for (let low = Math.floor(min / step) * step; low <= max && ranges.length < 8; low += step) {
    const lowText = Number(low.toPrecision(12));
    const highText = Number((low + step).toPrecision(12));
    ranges.push({ range: `[${lowText},${highText})`, label: `${formatNumber(lowText)} – ${formatNumber(highText)}` });
  }
  return ranges.reverse();  // largest first, as most lists of bands read
}

function formatNumber(value) {
  return typeof value === "number" && Math.abs(value) >= 10000 ? value.toLocaleString("en") : String(value);
}

/**
 * The page for this collection: what its settings' `searchPage` says, and for every part it leaves
 * out, a guess from the data: the title field by name (or the first text field), keyword-like text
 * fields (a few values shared by many records) as facets and facts, numeric fields as ranges, facts
 * and sort choices, the other text fields as lines under the title.
 */
async function pageConfig(info) {
  const page = (info.settings && info.settings.searchPage) || {};
  const fields = (info.fields || []).filter((field) => field.field !== "id" && !field.field.startsWith("_"));
  const strings = fields.filter((field) => field.kinds.includes("string"));
  // Numbers held by most records first; coordinates left out (a range of longitudes helps nobody).
  const coordinate = (field) => COORDINATE_NAMES.includes(field.field.split(".").pop().toLowerCase());
  const numbers = fields.filter((field) => field.kinds.length === 1 && field.kinds[0] === "number" && !coordinate(field))
    .sort((a, b) => b.records - a.records);
  const title = page.title
    || (TITLE_NAMES.map((name) => strings.find((field) => field.field.toLowerCase() === name)).find(Boolean)
      || strings[0] || { field: "id" }).field;

  let keywords = [];
  const needsProbe = !page.textFacets || !page.facts || !page.lines
    || (!page.numericFacets && numbers.length) || (page.numericFacets || []).some((facet) => !facet.ranges);
  const stats = {};
  if (needsProbe && (strings.length || numbers.length)) {
    // One search, no results: the top values of every text field and the range of every number.
    const probe = await api("/v2", {
      collection: COLLECTION, count: 0, facetCount: GUESSED.facetProbe,
      textFacets: strings.filter((field) => field.field !== title).map((field) => field.field),
      numericFacets: Object.fromEntries(numbers.map((field) => [field.field, []])),
    });
    const holders = new Map(fields.map((field) => [field.field, field.records]));
    keywords = probe.textFacets.map((facet) => {
      const covered = facet.values.reduce((sum, value) => sum + value.count, 0);
      const top = facet.values.length ? facet.values[0].count : 0;
      return { field: facet.field, share: covered / Math.max(1, holders.get(facet.field) || 1), top };
    }).filter((facet) => facet.top >= 2 && facet.share >= 0.5).sort((a, b) => b.share - a.share)
      .map((facet) => facet.field);
    for (const facet of probe.numericFacets) stats[facet.field] = facet.stats;
  }
  const numeric = (page.numericFacets || numbers.slice(0, GUESSED.numericFacets).map((field) => ({ field: field.field })))
    .map((facet) => ({
      field: facet.field, label: facet.label || humanize(facet.field),
      ranges: (facet.ranges || guessRanges(stats[facet.field] || {})).map((range) => ({ range: range.range, label: range.label || range.range })),
    })).filter((facet) => facet.ranges.length);
  const textFacets = (page.textFacets || keywords.slice(0, GUESSED.textFacets).map((field) => ({ field })))
    .map((facet) => ({ field: facet.field, label: facet.label || humanize(facet.field) }));
  const facts = page.facts || [
    ...numbers.filter((field) => field.field !== page.subtitle).slice(0, 2)
      .map((field) => ({ field: field.field, format: `${humanize(field.field)} {}` })),
    ...keywords.slice(0, GUESSED.facts - 2).map((field) => ({ field, format: `${humanize(field)}: {}` })),
  ];
  const shown = new Set([title, page.subtitle, ...facts.map((fact) => fact.field)]);
  const lines = page.lines || strings.filter((field) => !shown.has(field.field) && !keywords.includes(field.field))
    .slice(0, GUESSED.lines).map((field) => ({ field: field.field, label: humanize(field.field), limit: 5 }));
  const sorts = page.sort || numbers.slice(0, GUESSED.sorts).flatMap((field) => [
    { sort: `-${field.field}`, label: `${humanize(field.field)}: highest first` },
    { sort: field.field, label: `${humanize(field.field)}: lowest first` },
  ]);
  const textLike = new Set(strings.map((field) => field.field));
  return {
    title, subtitle: page.subtitle || null, facts, lines, textFacets, numericFacets: numeric, sorts,
    placeholder: page.placeholder || `Search ${COLLECTION} — typos welcome`,
    fields: [...new Set([title, page.subtitle, ...facts.map((fact) => fact.field), ...lines.map((line) => line.field)]
      .filter(Boolean))],
    highlightFields: [title, ...lines.map((line) => line.field)].filter((field) => page.title || textLike.has(field)),
  };
}

/** A field of a result: nested objects are addressed with dots, as in requests. */
function valueAt(record, path) {
  if (path in record) return record[path];
  let value = record;
  for (const part of path.split(".")) {
    if (value == null || typeof value !== "object") return undefined;
    value = value[part];
  }
  return value;
}

// Only the answer to the latest request is shown: answers to older keystrokes may arrive later, and
// so may their query embeddings (a slow hook): each step that waits checks its ticket again.
let latest = 0;

async function search() {
  const ticket = ++latest;
  rememberInAddress();
  $("results").setAttribute("aria-busy", "true");
  const body = requestBody();
  const space = hybridSpace();
  let note = "";
  if (space !== null && state.query.trim()) {
    try {
      const values = await embedQuery(state.query, space);
      body.vector = { name: space.name, values };
      body.semanticRatio = state.ratio;
    } catch (failure) {
      note = `Keyword results only: ${withoutStop(failure.message)}.`;
    }
    if (ticket !== latest) return;
  }
  let data;
  try {
    data = await api("/v2", body);
  } catch (failure) {
    if (ticket !== latest) return;
    if (!body.vector || failure.status !== "400") {
      showError(failure.message);
      return;
    }
    // The engine refused the vector (a space changed since the page loaded, say): words alone.
    note = `Keyword results only: the hybrid search was refused (${withoutStop(failure.message)}).`;
    delete body.vector;
    delete body.semanticRatio;
    try {
      data = await api("/v2", body);
    } catch (again) {
      if (ticket === latest) showError(again.message);
      return;
    }
  }
  if (ticket !== latest) return;
  $("results").removeAttribute("aria-busy");
  $("error").hidden = true;
  $("hybrid-note").textContent = note;
  $("hybrid-note").hidden = !note;
  render(data, body.vector ? space : null);
}

function withoutStop(text) {
  return String(text).replace(/[.\s]+$/, "");
}

/** The embedding hook, when the page has one: a function at `window.roarsearchEmbed`. */
function embedHook() {
  const hook = window.roarsearchEmbed;
  return typeof hook === "function" ? hook : null;
}

/** The space hybrid searches use (the chosen one, else the first), or null: no space or no hook. */
function hybridSpace() {
  if (!SPACES || !SPACES.length || !embedHook()) return null;
  return SPACES.find((space) => space.name === state.space) || SPACES[0];
}

/** `[{name, dimensions, metric}]` from a settings' `vectors` (name -> {dimensions, metric}). */
function spacesOf(vectors) {
  return Object.entries(vectors || {}).filter(([, space]) => space && Number.isInteger(space.dimensions))
    .map(([name, space]) => ({ name, dimensions: space.dimensions, metric: space.metric === undefined ? "cosine" : space.metric }));
}

// Query embeddings by collection, space and text, oldest first (a Map keeps insertion order).
const embeddings = new Map();
// The hook call in flight: a search for the same text waits for it; one for another text aborts it.
let pending = null;
// Counts the hooks set: a vector that a replaced hook gives late is not kept.
let hookGeneration = 0;
const TIMED_OUT = new Error(`the embedding hook gave no answer within ${EMBED_TIMEOUT_MS / 1000} s`);

/** The query's vector for `space`, from the cache or the hook; an Error saying what went wrong otherwise. */
async function embedQuery(text, space) {
  const key = JSON.stringify([COLLECTION, space.name, text]);
  const generation = hookGeneration;
  if (embeddings.has(key)) return embeddings.get(key);
  if (pending === null || pending.key !== key) {
    if (pending !== null) pending.controller.abort();
    const controller = new AbortController();
    const hook = embedHook();
    const context = { collection: COLLECTION, space: space.name, dimensions: space.dimensions, metric: space.metric,
      signal: controller.signal };
    let timer;
    const call = { key, controller };
    call.answer = Promise.race([
      Promise.resolve().then(() => hook(text, context)),  // a hook that throws at once rejects too
      new Promise((_, reject) => { timer = setTimeout(() => { controller.abort(); reject(TIMED_OUT); }, EMBED_TIMEOUT_MS); }),
    ]).finally(() => {
      clearTimeout(timer);
      if (pending === call) pending = null;
    });
    pending = call;
  }
  let values;
  try {
    values = await pending.answer;
  } catch (failure) {
    if (failure === TIMED_OUT) throw failure;
    throw new Error(`the embedding hook failed (${withoutStop(failure && failure.message ? failure.message : failure)})`);
  }
  const vector = checkedVector(values, space);
  if (generation !== hookGeneration) return vector;  // for a search that a newer one has replaced anyway
  embeddings.set(key, vector);
  if (embeddings.size > EMBED_CACHE_SIZE) embeddings.delete(embeddings.keys().next().value);
  return vector;
}

/** The hook's answer as a plain array that the engine will take for `space`, or an Error saying why not. */
function checkedVector(values, space) {
  const wanted = `${space.dimensions} numbers for the space “${space.name}”`;
  if (values == null || typeof values !== "object" || typeof values.length !== "number") {
    throw new Error(`the embedding hook returned ${values === null ? "null" : typeof values}, not ${wanted}`);
  }
  if (values.length !== space.dimensions) {
    throw new Error(`the embedding hook returned ${values.length} numbers, not the ${wanted}`);
  }
  const vector = Array.from(values);  // a Float32Array (what models return) becomes JSON numbers
  if (!vector.every((value) => typeof value === "number" && Number.isFinite(value))) {
    throw new Error(`the embedding hook returned something other than ${wanted} (a non-number, NaN or infinity)`);
  }
  if (space.metric === "cosine" && vector.every((value) => value === 0)) {
    throw new Error(`the embedding hook returned zeros, which have no direction (the space “${space.name}” is cosine)`);
  }
  return vector;
}

/** An API Error object `{status, data}` as a sentence a person can act on. */
function describeError(response, data) {
  const status = data && data.status ? data.status : response.status;
  let message = data && data.data != null ? data.data : response.statusText || "no details";
  if (typeof message !== "string") message = JSON.stringify(message);
  let hint = "";
  if (status === 401) hint = " Open the address that `roarsearch demo` printed: it carries the search key after #key=.";
  if (status === 403) hint = " This key or token may not search this collection.";
  if (status === 404) hint = ` Is there a collection named “${COLLECTION}”? Set it with #collection= in the address.`;
  return `Error ${status}: ${message}.${hint}`;
}

function showError(message) {
  $("results").removeAttribute("aria-busy");
  $("error").replaceChildren(el("p", {}, message));
  $("error").hidden = false;
}

/** A page of results; `space` is the vector space of a hybrid search (its results carry `_vectorScore`). */
function render(data, space) {
  const total = data.totalHits;
  const noun = total === 1 ? "result" : "results";
  $("status").textContent = `${total.toLocaleString("en")} ${noun} in ${data.responseTime} ms`;
  $("results").replaceChildren(...data.results.map((record) => renderRecord(record, space)));
  if (!data.results.length) {
    $("results").append(el("li", { className: "empty" }, total ? "No more results on this page." :
      "Nothing matches. Try fewer words or clear the filters."));
  }
  const page = Math.floor(state.skip / PAGE_SIZE) + 1;
  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
  $("pager").hidden = pages <= 1 && state.skip === 0;
  $("page-label").textContent = `Page ${page.toLocaleString("en")} of ${pages.toLocaleString("en")}`;
  $("previous").disabled = state.skip === 0;
  $("next").disabled = state.skip + PAGE_SIZE >= total;
  renderFacets(data);
}

function renderRecord(record, space) {
  const highlights = record._highlights || {};
  const titleValue = valueAt(record, CONFIG.title);
  const heading = el("h2", {}, marked("span", highlights[CONFIG.title],
    titleValue == null || titleValue === "" ? `(no ${CONFIG.title}: id ${record.id})` : listOf(titleValue).join(", ")));
  const subtitle = CONFIG.subtitle ? valueAt(record, CONFIG.subtitle) : null;
  if (subtitle != null) heading.append(" ", el("span", { className: "year" }, `(${listOf(subtitle).join(", ")})`));
  const facts = [];
  for (const fact of CONFIG.facts) {
    const values = listOf(valueAt(record, fact.field)).filter((value) => value !== null && typeof value !== "object");
    if (!values.length) continue;
    const text = values.map(formatNumber).join(", ");
    const shown = fact.format ? fact.format.replace("{}", text) : text;
    facts.push(fact.badge ? el("span", { className: "badge" }, shown) : shown);
  }
  if (space && typeof record._vectorScore === "number") {
    // A vector match: how near the query it is (keyword-only matches of a hybrid search have none).
    facts.push(el("span", { className: "vector-score", "data-vector-score": String(record._vectorScore) },
      `${SCORE_LABELS[space.metric] || "Vector score"} ${record._vectorScore.toFixed(3)}`));
  }
  const meta = el("p", { className: "meta" });
  facts.forEach((fact, index) => meta.append(index ? " · " : "", fact));
  const item = el("li", {}, heading);
  if (facts.length) item.append(meta);
  for (const line of CONFIG.lines) {
    const names = nameLine(listOf(valueAt(record, line.field)).filter((value) => typeof value !== "object"),
      listOf(highlights[line.field]), line.limit || Infinity);
    if (names) item.append(el("p", { className: "credit" }, line.label ? `${line.label} ` : "", names));
  }
  return item;
}

/** A field that may hold one name or an array of them (records added by hand may use either). */
function listOf(value) {
  if (Array.isArray(value)) return value;
  return value == null || value === "" ? [] : [value];
}

/** Up to `limit` names, the ones the query matched first (their highlights carry `<em>`). */
function nameLine(people, highlighted, limit) {
  if (!people.length) return null;
  const names = people.map((name, index) => ({ name: String(name), highlight: highlighted[index] }));
  const matched = names.filter((entry) => typeof entry.highlight === "string" && entry.highlight.includes("<em>"));
  const shown = [...matched, ...names.filter((entry) => !matched.includes(entry))].slice(0, limit);
  const line = el("span");
  shown.forEach((entry, index) => line.append(index ? ", " : "", marked("span", entry.highlight, entry.name)));
  if (people.length > shown.length) line.append(` and ${people.length - shown.length} more`);
  return line;
}

function renderFacets(data) {
  // Re-rendering replaces the checkboxes: remember which one had the keyboard focus and give it back.
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.key : undefined;
  const groups = [];
  for (const facet of CONFIG.textFacets) {
    const answer = (data.textFacets || []).find((candidate) => candidate.field === facet.field);
    const chosen = state.text[facet.field] || [];
    const values = answer ? answer.values.map((item) => ({ value: item.value, label: String(item.value), count: item.count })) : [];
    // A chosen value can fall out of the top values; it stays listed so that it can be unticked.
    for (const value of chosen) {
      if (!values.some((item) => item.value === value)) values.push({ value, label: value, count: null });
    }
    if (values.length) groups.push(facetGroup("text", facet.field, facet.label, values, chosen));
  }
  for (const facet of CONFIG.numericFacets) {
    const answer = (data.numericFacets || []).find((candidate) => candidate.field === facet.field);
    const counts = new Map((answer ? answer.ranges : []).map((range) => [range.range, range.count]));
    const chosen = state.numeric[facet.field] || [];
    const values = facet.ranges.map(({ range, label }) => ({ value: range, label, count: counts.has(range) ? counts.get(range) : null }));
    groups.push(facetGroup("numeric", facet.field, facet.label, values, chosen));
  }
  $("facets").replaceChildren(...groups);
  if (focused) {
    const again = [...$("facets").querySelectorAll("input")].find((box) => box.dataset.key === focused);
    if (again) again.focus();
  }
  const active = Object.values(state.text).flat().length + Object.values(state.numeric).flat().length;
  $("clear-filters").hidden = active === 0;
  $("active-count").textContent = active ? `(${active} active)` : "";
}

function facetGroup(kind, field, label, values, chosen) {
  const group = el("fieldset", { "data-facet": field }, el("legend", {}, label));
  values.forEach((item, index) => {
    const id = `facet-${field}-${index}`;
    const checked = chosen.includes(item.value);
    const box = el("input", {
      type: "checkbox", id, checked, "data-kind": kind, "data-field": field, "data-value": String(item.value),
      "data-json": JSON.stringify(item.value), "data-key": `${kind}\u0000${field}\u0000${item.value}`,
    });
    const count = el("span", { className: "count" }, item.count == null ? "" : item.count.toLocaleString("en"));
    const row = el("label", { for: id, className: item.count === 0 && !checked ? "none" : null },
      el("span", {}, box, " ", item.label), count);
    group.append(row);
  });
  return group;
}

function rememberInAddress() {
  const address = new URLSearchParams();
  if (KEY) address.set("key", KEY);
  address.set("collection", COLLECTION);
  if (state.query) address.set("q", state.query);
  if (state.sort) address.set("sort", state.sort);
  if (hybridSpace() !== null) {
    if (SPACES.length > 1 && state.space) address.set("space", state.space);
    if (state.ratio !== DEFAULT_RATIO) address.set("ratio", String(state.ratio));
  }
  history.replaceState(null, "", `#${address.toString()}`);
}

function restart() {
  state.skip = 0;
  search();
}

let debounce = 0;
$("query").value = state.query;
$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();  // Enter searches at once, without waiting for the debounce
  clearTimeout(debounce);
  restart();
});
$("query").addEventListener("input", (event) => {
  state.query = event.target.value;
  // Busy from the keystroke on, not only once the request leaves: what is shown is about to change.
  $("results").setAttribute("aria-busy", "true");
  clearTimeout(debounce);
  debounce = setTimeout(restart, DEBOUNCE_MS);
});
$("query").addEventListener("keydown", (event) => {
  if (event.key === "Escape" && $("query").value) {
    event.preventDefault();
    $("query").value = "";
    state.query = "";
    clearTimeout(debounce);
    restart();
  }
});
$("sort").addEventListener("change", (event) => {
  state.sort = event.target.value;
  restart();
});
$("space").addEventListener("change", (event) => {
  state.space = event.target.value;
  restart();
});
$("semantic-ratio").addEventListener("input", (event) => {
  state.ratio = Number(event.target.value);
  showRatio();
  if (!state.query.trim()) {  // no words, no vector sent: nothing to search again
    rememberInAddress();
    return;
  }
  // Dragging gives many values: search once it rests, as for typing.
  $("results").setAttribute("aria-busy", "true");
  clearTimeout(debounce);
  debounce = setTimeout(restart, DEBOUNCE_MS);
});
$("collection").addEventListener("change", (event) => {
  // Another collection: a page of its own (its fields, facets and sort choices), from the start.
  const address = new URLSearchParams();
  if (KEY) address.set("key", KEY);
  address.set("collection", event.target.value);
  location.hash = address.toString();
});
function turnPage(delta) {
  state.skip = Math.max(0, state.skip + delta * PAGE_SIZE);
  search().then(() => {
    // Where a reader of the new page starts: the first result, also for screen readers.
    $("results").focus({ preventScroll: true });
    $("results").scrollIntoView({ block: "start" });
  });
}
$("previous").addEventListener("click", () => turnPage(-1));
$("next").addEventListener("click", () => turnPage(1));
$("facets").addEventListener("change", (event) => {
  const box = event.target;
  const chosen = box.dataset.kind === "numeric" ? state.numeric : state.text;
  const field = box.dataset.field;
  // Text facet values keep their JSON type (a number facet filters by the number).
  const value = box.dataset.kind === "numeric" ? box.dataset.value : JSON.parse(box.dataset.json);
  const values = (chosen[field] || []).filter((other) => other !== value);
  if (box.checked) values.push(value);
  if (values.length) chosen[field] = values;
  else delete chosen[field];
  restart();
});
$("clear-filters").addEventListener("click", () => {
  state.text = {};
  state.numeric = {};
  $("query").focus();
  restart();
});
document.addEventListener("keydown", (event) => {
  const target = event.target;
  const typing = (target instanceof HTMLInputElement && ["text", "search"].includes(target.type))
    || target instanceof HTMLSelectElement || target instanceof HTMLTextAreaElement;
  if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
    event.preventDefault();
    $("query").focus();
    $("query").select();
  }
});
window.addEventListener("hashchange", () => location.reload());  // a new key or collection: start over

// On a phone the filters start folded, so that the first screen shows results.
if (window.matchMedia("(max-width: 48rem)").matches) $("refine").open = false;

/** The hybrid controls: shown when the page can search hybrid, with the space picker when there are several. */
function showHybridControls() {
  const space = hybridSpace();
  $("hybrid-area").hidden = space === null;
  if (space === null) {
    $("hybrid-note").hidden = true;
    return;
  }
  $("space").replaceChildren(...SPACES.map((choice) =>
    el("option", { value: choice.name, selected: choice === space }, `${choice.name} (${choice.dimensions})`)));
  $("space-area").hidden = SPACES.length < 2;
  $("semantic-ratio").value = String(state.ratio);
  showRatio();
}

function showRatio() {
  const meaning = Math.round(state.ratio * 100);
  $("semantic-ratio-value").textContent = state.ratio.toFixed(1);
  $("semantic-ratio").setAttribute("aria-valuetext", `${state.ratio.toFixed(1)}: ${100 - meaning} % keywords, ${meaning} % meaning`);
}

/** The vector spaces, for a credential that cannot read settings: names and lengths of records' `_vectors`. */
async function spacesFromResults() {
  const answer = await api("/v2", { collection: COLLECTION, query: "", count: 20, fields: ["_vectors"] });
  const vectors = {};
  for (const record of answer.results) {
    for (const [name, values] of Object.entries(record._vectors || {})) {
      if (Array.isArray(values) && values.length) vectors[name] = { dimensions: values.length, metric: null };  // unknown
    }
  }
  return spacesOf(vectors);
}

/** A hook set (or replaced, or removed) once the page runs: from a script loaded later, or the console. */
async function hookChanged() {
  hookGeneration += 1;
  embeddings.clear();  // another hook may embed differently: what the old one gave is forgotten
  if (pending !== null) pending.controller.abort();
  pending = null;
  if (CONFIG === null) return;  // `start` has not finished: it shows the controls itself
  if (SPACES === null && embedHook()) SPACES = await spacesFromResults().catch(() => null);
  if (!SPACES || !SPACES.length) return;  // nothing to embed for: the page stays as it is
  showHybridControls();
  restart();
}

// `window.roarsearchEmbed` becomes a property the page watches, keeping any hook set before it ran.
// (A hook declared with `var` or `function` cannot be watched: it is still read at every search.)
try {
  let hook = window.roarsearchEmbed;
  Object.defineProperty(window, "roarsearchEmbed", {
    configurable: true, enumerable: true,
    get: () => hook,
    set: (value) => {
      hook = value;
      hookChanged();
    },
  });
} catch (failure) {
  console.warn("roarsearch: window.roarsearchEmbed was declared with var or function: the page reads it at each "
    + "search but cannot notice a change; assign it instead (window.roarsearchEmbed = …)", failure);
}

/** What `GET /v2/collections/{id}` tells, guessed from the first records a search returns (for a
 * credential that may only search): each top-level field with its kinds and how many hold it. */
async function infoFromResults() {
  const answer = await api("/v2", { collection: COLLECTION, query: "", count: 100 });
  const byField = new Map();
  for (const record of answer.results) {
    for (const [field, value] of Object.entries(record)) {
      if (field === "id" || field.startsWith("_") || value === null) continue;
      const values = Array.isArray(value) ? value : [value];
      const entry = byField.get(field) || { field, kinds: [], records: 0 };
      for (const item of values) {
        const kind = typeof item === "string" ? "string" : typeof item === "number" ? "number" : null;
        if (kind && !entry.kinds.includes(kind)) entry.kinds.push(kind);
      }
      entry.records += 1;
      byField.set(field, entry);
    }
  }
  return { fields: [...byField.values()].filter((entry) => entry.kinds.length), settings: {}, guessed: true };
}

/** The collections this key may search, in the picker; then the chosen one's page. */
async function start() {
  if (!KEY) {
    showError("No search key: open the address that `roarsearch demo` printed (it ends with #key=…&collection=movies).");
    return;
  }
  let info;
  try {
    // A key or tenant token that may only search cannot list collections or read their fields:
    // the page then shows the collection it was given, guessed from the records a search returns.
    const collections = await api("/v2/collections").catch((failure) => {
      if (!COLLECTION || !/^(401|403)\b/.test(failure.status || "")) throw failure;
      return [];
    });
    const names = collections.map((entry) => entry.collection);
    if (!COLLECTION) COLLECTION = names.includes("movies") ? "movies" : names[0] || "";
    if (!COLLECTION) throw new Error("There is no collection yet: add records first (roarsearch import, or POST /v2/collections/{id}/records).");
    const picker = $("collection");
    picker.replaceChildren(...[...new Set([...names, COLLECTION])].map((name) => {
      const entry = collections.find((candidate) => candidate.collection === name);
      const count = entry ? ` (${entry.records.toLocaleString("en")})` : "";
      return el("option", { value: name, selected: name === COLLECTION }, `${name}${count}`);
    }));
    $("collection-name").textContent = COLLECTION;
    info = await api(`/v2/collections/${encodeURIComponent(COLLECTION)}`).catch((failure) => {
      if (!/^(401|403)\b/.test(failure.status || "")) throw failure;
      return infoFromResults();
    });
    CONFIG = await pageConfig(info);
    // Vector spaces: from the settings; for a guessed page, from records, but only once a hook
    // could use them (without one, the page asks nothing more than before).
    SPACES = info.guessed ? null : spacesOf(info.settings && info.settings.vectors);
    if (SPACES === null && embedHook()) SPACES = await spacesFromResults().catch(() => null);
  } catch (failure) {
    showError(failure.message);
    return;
  }
  $("query").placeholder = CONFIG.placeholder;
  $("sort").replaceChildren(el("option", { value: "" }, "Relevance"),
    ...CONFIG.sorts.map((choice) => el("option", { value: choice.sort }, choice.label)));
  if (!CONFIG.sorts.some((choice) => choice.sort === state.sort)) state.sort = "";
  $("sort").value = state.sort;
  $("sort-area").hidden = CONFIG.sorts.length === 0;
  showHybridControls();
  search();
}

start();

// The search page: a plain client of the public HTTP API, and an example of one.
//
// Every search is one `POST /v2` with `Authorization: Bearer <search-only key>` and a JSON body as
// in the contract (§3). Key and collection come from the URL fragment,
// `#key=<search key>&collection=movies` (a fragment never reaches any server's logs); a tenant token
// (docs/security.md) is taken there like a key, as is any bearer credential; the query
// rides there too (`&q=`), so a reload or a shared link keeps it.
//
// Safety rule: record text only ever reaches the DOM through `textContent`. The one exception is
// the engine's `_highlights` strings, which the engine has already escaped and only adds `<em>` to.
"use strict";

const PAGE_SIZE = 10;
const DEBOUNCE_MS = 120;
const TEXT_FACETS = [
  { field: "genres", label: "Genre" },
  { field: "mpaaRating", label: "MPAA rating" },
  { field: "languages", label: "Language" },
];
// Numeric facets: interval strings as the API takes them (`[` `]` inclusive, `(` `)` exclusive).
const NUMERIC_FACETS = [
  {
    field: "year", label: "Year", ranges: [
      ["[1900,1950)", "Before 1950"], ["[1950,1970)", "1950s–60s"], ["[1970,1980)", "1970s"],
      ["[1980,1990)", "1980s"], ["[1990,2000)", "1990s"], ["[2000,2010)", "2000s"], ["[2010,)", "2010 and later"],
    ],
  },
  {
    field: "tomatoMeter", label: "Tomatometer", ranges: [
      ["[90,100]", "90–100% (acclaimed)"], ["[75,90)", "75–89%"], ["[60,75)", "60–74% (fresh)"], ["[0,60)", "Below 60% (rotten)"],
    ],
  },
];
const SORT_CHOICES = new Set(["", "-year", "year", "-tomatoMeter"]);

const fragment = new URLSearchParams(location.hash.slice(1));
const KEY = (fragment.get("key") || "").trim();  // a search key or a tenant token (a JWT: base64url and dots)
const COLLECTION = fragment.get("collection") || "movies";

const state = {
  query: fragment.get("q") || "",
  sort: SORT_CHOICES.has(fragment.get("sort") || "") ? fragment.get("sort") || "" : "",
  skip: 0,
  text: {},      // field -> chosen values (any of them: OR within a field, AND across fields)
  numeric: {},   // field -> chosen interval strings
};

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
    fields: ["title", "year", "director", "genres", "cast", "tomatoMeter", "mpaaRating", "runtime"],
    searchFields: ["title", "director", "cast", "writers"],
    highlightFields: ["title", "director", "cast"],
    textFacets: TEXT_FACETS.map((facet) => facet.field),
    facetCount: 8,
    textFacetFilters: state.text,
    numericFacets: Object.fromEntries(NUMERIC_FACETS.map((facet) => [facet.field, facet.ranges.map(([range]) => range)])),
    numericFacetFilters: state.numeric,
  };
  if (state.sort) body.sort = [state.sort];
  return body;
}

// Only the answer to the latest request is shown: answers to older keystrokes may arrive later.
let latest = 0;

async function search() {
  const ticket = ++latest;
  rememberInAddress();
  $("results").setAttribute("aria-busy", "true");
  let response;
  let data;
  try {
    response = await fetch("/v2", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": `Bearer ${KEY}` },
      body: JSON.stringify(requestBody()),
    });
    data = await response.json().catch(() => null);
  } catch (failure) {
    if (ticket === latest) showError(`Cannot reach the server (${failure.message}). Is roarsearch still running?`);
    return;
  }
  if (ticket !== latest) return;
  $("results").removeAttribute("aria-busy");
  if (!response.ok || data === null) {
    showError(describeError(response, data));
    return;
  }
  $("error").hidden = true;
  render(data);
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

function render(data) {
  const total = data.totalHits;
  const noun = total === 1 ? "result" : "results";
  $("status").textContent = `${total.toLocaleString("en")} ${noun} in ${data.responseTime} ms`;
  $("results").replaceChildren(...data.results.map(renderRecord));
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

function renderRecord(record) {
  const highlights = record._highlights || {};
  const heading = el("h2", {}, marked("span", highlights.title, record.title || "(untitled)"));
  if (record.year != null) heading.append(" ", el("span", { className: "year" }, `(${record.year})`));
  const facts = [];
  if (record.mpaaRating) facts.push(el("span", { className: "badge" }, record.mpaaRating));
  if (record.runtime) facts.push(`${record.runtime} min`);
  if (record.tomatoMeter != null) facts.push(`Tomatometer ${record.tomatoMeter}%`);
  if (record.genres && record.genres.length) facts.push(record.genres.join(", "));
  const meta = el("p", { className: "meta" });
  facts.forEach((fact, index) => meta.append(index ? " · " : "", fact));
  const item = el("li", {}, heading, meta);
  const directors = nameLine(listOf(record.director), listOf(highlights.director), Infinity);
  if (directors) item.append(el("p", { className: "credit" }, "Directed by ", directors));
  const cast = nameLine(listOf(record.cast), listOf(highlights.cast), 5);
  if (cast) item.append(el("p", { className: "credit" }, "With ", cast));
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
  for (const facet of TEXT_FACETS) {
    const answer = (data.textFacets || []).find((candidate) => candidate.field === facet.field);
    const chosen = state.text[facet.field] || [];
    const values = answer ? answer.values.map((item) => ({ value: item.value, label: item.value, count: item.count })) : [];
    // A chosen value can fall out of the top values; it stays listed so that it can be unticked.
    for (const value of chosen) {
      if (!values.some((item) => item.value === value)) values.push({ value, label: value, count: null });
    }
    if (values.length) groups.push(facetGroup("text", facet.field, facet.label, values, chosen));
  }
  for (const facet of NUMERIC_FACETS) {
    const answer = (data.numericFacets || []).find((candidate) => candidate.field === facet.field);
    const counts = new Map((answer ? answer.ranges : []).map((range) => [range.range, range.count]));
    const chosen = state.numeric[facet.field] || [];
    const values = facet.ranges.map(([range, label]) => ({ value: range, label, count: counts.has(range) ? counts.get(range) : null }));
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
      type: "checkbox", id, checked, "data-kind": kind, "data-field": field, "data-value": item.value,
      "data-key": `${kind}\u0000${field}\u0000${item.value}`,
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
  history.replaceState(null, "", `#${address.toString()}`);
}

function restart() {
  state.skip = 0;
  search();
}

let debounce = 0;
$("query").value = state.query;
$("sort").value = state.sort;
$("collection-name").textContent = COLLECTION;
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
  const values = (chosen[field] || []).filter((value) => value !== box.dataset.value);
  if (box.checked) values.push(box.dataset.value);
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

if (!KEY) {
  showError("No search key: open the address that `roarsearch demo` printed (it ends with #key=…&collection=movies).");
} else {
  search();
}

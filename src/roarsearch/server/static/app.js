// The search page: a plain client of the public HTTP API (POST /v2 with a search-only key).
// Key and collection come from the URL fragment: #key=<search key>&collection=movies
"use strict";

const params = new URLSearchParams(location.hash.slice(1));
const KEY = params.get("key") || "";
const COLLECTION = params.get("collection") || "movies";
const PAGE_SIZE = 10;
const TEXT_FACETS = ["genres", "languages", "mpaaRating"];
const DECADES = ["[1900,1950)", "[1950,1970)", "[1970,1990)", "[1990,2000)", "[2000,2010)", "[2010,)"];

const state = { query: "", sort: "", skip: 0, textFilters: {}, decades: [] };
const $ = (id) => document.getElementById(id);

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function requestBody() {
  const body = {
    collection: COLLECTION, query: state.query, skip: state.skip, count: PAGE_SIZE,
    fields: ["title", "year", "director", "genres", "cast", "tomatoMeter"],
    searchFields: ["title", "director", "cast", "writers"],
    highlightFields: ["title", "director"],
    textFacets: TEXT_FACETS, facetCount: 8,
    textFacetFilters: state.textFilters,
    numericFacets: { year: DECADES },
  };
  if (state.decades.length) body.numericFacetFilters = { year: state.decades };
  if (state.sort) body.sort = [state.sort];
  return body;
}

let inFlight = 0;
async function search() {
  const ticket = ++inFlight;
  let response;
  try {
    response = await fetch("/v2", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + KEY },
      body: JSON.stringify(requestBody()),
    });
  } catch (failure) {
    return showError("network error: " + failure.message);
  }
  const data = await response.json();
  if (ticket !== inFlight) return; // a newer keystroke already asked again
  if (!response.ok) return showError(`${data.status}: ${data.data}`);
  $("error").hidden = true;
  render(data);
}

function showError(message) {
  const error = $("error");
  error.textContent = message;
  error.hidden = false;
}

function render(data) {
  const page = Math.floor(state.skip / PAGE_SIZE) + 1;
  const pages = Math.max(1, Math.ceil(data.totalHits / PAGE_SIZE));
  $("status").textContent = `${data.totalHits.toLocaleString()} results in ${data.responseTime} ms`;
  $("results").innerHTML = data.results.map((record) => {
    const marked = record._highlights || {};
    const title = marked.title || escapeHtml(record.title || "(untitled)");   // _highlights is escaped by the engine
    const director = marked.director || escapeHtml(record.director || "");
    const cast = (record.cast || []).slice(0, 4).map(escapeHtml).join(", ");
    const genres = (record.genres || []).map(escapeHtml).join(", ");
    const meter = record.tomatoMeter != null ? ` · Tomatometer ${escapeHtml(record.tomatoMeter)}%` : "";
    return `<li><h2>${title} <span class="year">(${escapeHtml(record.year ?? "?")})</span></h2>
      <p class="meta">${director}${genres ? " · " + genres : ""}${meter}</p>
      <p class="meta">${cast}</p></li>`;
  }).join("");
  $("page-label").textContent = `Page ${page} of ${pages}`;
  $("previous").disabled = state.skip === 0;
  $("next").disabled = state.skip + PAGE_SIZE >= data.totalHits;
  renderFacets(data);
}

function renderFacets(data) {
  const groups = data.textFacets.map((facet) => {
    const chosen = state.textFilters[facet.field] || [];
    const boxes = facet.values.map((item) => {
      const id = `f-${facet.field}-${String(item.value).replace(/\W+/g, "_")}`;
      const checked = chosen.includes(item.value) ? "checked" : "";
      return `<label for="${id}"><span><input type="checkbox" id="${id}" data-field="${escapeHtml(facet.field)}"
        data-value="${escapeHtml(item.value)}" ${checked}> ${escapeHtml(item.value)}</span>
        <span class="count">${item.count}</span></label>`;
    }).join("");
    return `<fieldset><legend>${escapeHtml(facet.field)}</legend>${boxes}</fieldset>`;
  });
  const years = (data.numericFacets.find((facet) => facet.field === "year") || { ranges: [] }).ranges;
  const decades = years.map((range, index) => {
    const id = `decade-${index}`;
    const checked = state.decades.includes(range.range) ? "checked" : "";
    return `<label for="${id}"><span><input type="checkbox" id="${id}" data-range="${range.range}" ${checked}>
      ${range.range}</span><span class="count">${range.count}</span></label>`;
  }).join("");
  $("facets").innerHTML = groups.join("") + `<fieldset><legend>year</legend>${decades}</fieldset>`;
}

let debounce = 0;
$("query").addEventListener("input", (event) => {
  state.query = event.target.value;
  state.skip = 0;
  clearTimeout(debounce);
  debounce = setTimeout(search, 120);
});
$("sort").addEventListener("change", (event) => { state.sort = event.target.value; state.skip = 0; search(); });
$("previous").addEventListener("click", () => { state.skip = Math.max(0, state.skip - PAGE_SIZE); search(); });
$("next").addEventListener("click", () => { state.skip += PAGE_SIZE; search(); });
$("facets").addEventListener("change", (event) => {
  const box = event.target;
  if (box.dataset.range) {
    state.decades = box.checked ? [...state.decades, box.dataset.range] : state.decades.filter((r) => r !== box.dataset.range);
  } else {
    const field = box.dataset.field;
    const values = state.textFilters[field] || [];
    state.textFilters[field] = box.checked ? [...values, box.dataset.value] : values.filter((v) => v !== box.dataset.value);
    if (!state.textFilters[field].length) delete state.textFilters[field];
  }
  state.skip = 0;
  search();
});

if (!KEY) showError("No search key: open the address that `roarsearch demo` printed (it ends with #key=…).");
search();

// The search page's embedding hook: this bundled file defines none, so the page searches by words.
//
// An application that wants hybrid search on the page serves its own `embed.js` here, on the page's
// origin, setting
//
//   window.roarsearchEmbed = async (text, { collection, space, dimensions, metric, signal }) => numbers;
//
// which returns the query's embedding (an array of `dimensions` numbers, made by the model that
// embedded the records). The page then sends hybrid searches whenever the collection declares a
// vector space. The hook may also be set later (by a script that loads a model first, or from the
// browser console): the page notices and searches again. The contract, errors and a complete
// example: docs/vectors.md, "Hybrid search on the search page".
"use strict";

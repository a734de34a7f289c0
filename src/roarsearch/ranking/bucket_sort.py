"""Relevance: bucket sort of the match set by the contract's ranking rules, on bitmaps.

Owns: the order of contract §4 — fewer typos, then query words closer together, then matches in
earlier ``searchFields``, then exact words over prefixes, then record id ascending — and the
``_rank`` number derived from it.

Model (Meilisearch's): each rule takes a candidate bitmap and yields disjoint buckets of it, best
first, each with its cost. Bucket sort descends rule by rule into a bucket only while it is still
needed: a bucket wholly before ``skip`` is counted and skipped, a bucket of one doc or the last
rule's bucket is emitted in record id order, and the walk stops once ``skip + count`` docs are
placed, so ranking cost follows the page, not the match count. Rule costs:

- typo: total typos over the words (buckets from a dynamic programme over per-word bitmaps);
- proximity: sum over consecutive word pairs of their smallest distance in one field (positions
  from ``FieldPostings.occurrences``, vectorised in numpy), capped at :data:`PROXIMITY_CAP` per pair;
- attribute: index of the earliest searched field holding a query word as typed (no typo); for
  records with no such word, the number of fields plus the earliest field with a typo'd match;
- exactness: 0 when every word occurs as itself (not only as a typo or a longer word); 1 when every
  word occurs whole (itself or a typo'd whole word, not only as a longer word it starts); else 2.

``_rank`` packs the costs into one float in (0, 1]: higher is better and equal costs give equal
ranks, so it never contradicts the order (ties are broken by record id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import EMPTY, array_from_bitmap, bitmap_from_array, sorted_unique, union_all
from roarsearch.index.docstore import DocStore
from roarsearch.index.positions import DocMask, FewDocs
from roarsearch.query.match import WordMatcher
from roarsearch.query.plan import WordPlan

#: Largest distance counted between two consecutive query words (words farther apart, or in
#: different fields, or in different array elements, cost this much).
PROXIMITY_CAP = 8
#: Bits per rule in the packed cost behind ``_rank`` (typo, proximity, attribute, exactness).
_COST_BITS = (8, 8, 8, 8)

Rule = Callable[[AbstractBitMap], Iterator[tuple[int, AbstractBitMap]]]


def pack_costs(typo: int, proximity: int, attribute: int, exactness: int) -> float:
    """``_rank`` for a cost tuple: 1.0 for a perfect match, lower for worse ones."""
    packed = 0
    for value in (typo, proximity, attribute, exactness):
        packed = (packed << 8) | min(int(value), 255)
    return 1.0 - packed / float(1 << 32)


@dataclass(slots=True)
class RelevanceRules:
    """The ranking rules of one query, bound to its matcher and words."""

    matcher: WordMatcher
    words: list[WordPlan]

    def __init__(self, matcher: WordMatcher, words: list[WordPlan]) -> None:
        # Written out: a dataclass's generated __init__ runs as interpreted Python (see WordPlan).
        self.matcher = matcher
        self.words = words

    # ---------------------------------------------------------------- the rules

    # When a rule tells candidates apart at all (otherwise each costs 0): asked by the rule itself
    # and by :meth:`_bucket_costs`, which then skips its walk.
    def _typos_differ(self) -> bool:
        return any(word.max_typos for word in self.words)

    def _fields_differ(self) -> bool:
        return len(self.matcher.fields) > 1 and bool(self.words)

    def _inexact_words(self) -> list[WordPlan]:
        """Words that match more than themselves (a typo'd or longer word)."""
        return [word for word in self.words if not word.is_exact_only()]

    def typo_buckets(self, candidates: AbstractBitMap) -> Iterator[tuple[int, AbstractBitMap]]:
        """Docs by total typo count: DP over words of "docs matching words[:k] within c typos"."""
        if not self._typos_differ():
            yield 0, candidates
            return
        budgets = [word.max_typos for word in self.words]
        total = sum(budgets)
        within = [candidates] * (total + 1)  # docs of words[:0] within c typos: all candidates
        reached = 0
        for word, budget in zip(self.words, budgets):
            reached += budget
            # Within its whole budget a word matches every candidate (candidates hold every word).
            per_typo = [self.matcher.docs_within(word, t, candidates) for t in range(budget)] + [candidates]
            # within[c] for c past the budgets seen so far equals within[reached]: pad with it.
            grown = [
                union_all([within[c - t] & per_typo[t] for t in range(min(c, budget) + 1)])
                for c in range(reached + 1)
            ]
            within = grown + [grown[reached]] * (total - reached)
        seen = BitMap()
        for cost in range(total + 1):
            bucket = within[cost] - seen
            if bucket:
                seen |= bucket
                yield cost, bucket
        rest = candidates - seen
        if rest:
            yield total, rest

    def proximity_buckets(self, candidates: AbstractBitMap) -> Iterator[tuple[int, AbstractBitMap]]:
        # A lone candidate is measured too: its _rank must not depend on which other docs match.
        if len(self.words) < 2 or not candidates:
            yield 0, candidates
            return
        docs = array_from_bitmap(candidates)
        costs = self.proximity_costs(docs, candidates)
        for cost in sorted_unique(costs).tolist():
            yield int(cost), bitmap_from_array(docs[costs == cost])

    def attribute_buckets(self, candidates: AbstractBitMap) -> Iterator[tuple[int, AbstractBitMap]]:
        fields = self.matcher.fields
        if not self._fields_differ():
            yield 0, candidates
            return
        remaining = candidates
        for offset, parts in self._attribute_passes():
            for position in range(len(fields)):
                # Each word's docs in the field within what is left, then their union: intersecting
                # first keeps a common word's docs from being unioned whole. A field none of them
                # is in costs a test per word, no bitmap.
                hits = [word_parts[position] for word_parts in parts if word_parts[position].intersect(remaining)]
                if not hits:
                    continue
                bucket = union_all([remaining & part for part in hits]) if len(hits) > 1 else remaining & hits[0]
                if bucket:
                    remaining = remaining - bucket
                    yield offset + position, bucket
                if not remaining:
                    return
        if remaining:
            yield 2 * len(fields), remaining

    def _attribute_passes(self) -> Iterator[tuple[int, list[list[AbstractBitMap]]]]:
        """The attribute rule's two passes, each as (cost of its first field, each word's docs per
        field): a word found as typed (no typo) decides the attribute first — a typo'd look-alike
        in the title ("Banks" for "hanks") must not outrank the exact word in the second field —,
        then with its typos. Lazy: the second pass's docs are looked up only if asked for."""
        for offset, typos in ((0, 0), (len(self.matcher.fields), None)):
            yield offset, [self.matcher.field_parts(word, word.max_typos if typos is None else typos)
                           for word in self.words]

    def exactness_buckets(self, candidates: AbstractBitMap) -> Iterator[tuple[int, AbstractBitMap]]:
        inexact = self._inexact_words()
        if not inexact:  # each word's exact docs are its match set, which holds every candidate
            yield 0, candidates
            return
        exact = candidates.copy()
        for word in inexact:
            exact &= self.matcher.exact_docs(word)
            if not exact:
                break
        if exact:
            yield 0, exact
        rest = candidates - exact
        if not rest:
            return
        # Then every word matched whole (with a typo): "lusan" for "luman" before "luanda", which
        # only starts with a typo'd "luman" — a longer word is a guess about what is still to come.
        whole = rest.copy()
        if any(word.is_prefix for word in self.words):
            for word in self.words:
                if word.is_prefix:
                    whole &= self.matcher.whole_docs(word)
                if not whole:
                    break
        if whole:
            yield 1, whole
        rest = rest - whole
        if rest:
            yield 2, rest

    def rules(self) -> list[Rule]:
        return [self.typo_buckets, self.proximity_buckets, self.attribute_buckets, self.exactness_buckets]

    # ---------------------------------------------------------------- vectorised costs

    def proximity_costs(self, docs: np.ndarray, candidates: AbstractBitMap) -> np.ndarray:
        """Per doc of ``docs`` (sorted; ``candidates``, the same docs as a bitmap),
        the summed capped distance of consecutive query words."""
        if docs.size <= FEW_DOCS:
            few_terms = self._few_word_terms()
            if few_terms is not None:
                return np.asarray(self._few_proximity_costs(docs.tolist(), *few_terms, candidates), dtype=np.int64)
        word_terms, typo_free_terms = self._word_terms()
        return self._proximity_costs(docs, word_terms, typo_free_terms, candidates)

    def _word_terms(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Each word's term ids, and those it may match in a typo-disabled field."""
        word_terms = [self.matcher.term_ids(word) for word in self.words]
        if not self.matcher.typo_disabled_fields:
            return word_terms, word_terms
        return word_terms, [self.matcher.term_ids(word, typo_free=True) for word in self.words]

    def _few_word_terms(self) -> tuple[list[list[int]], list[list[int]]] | None:
        """:meth:`_word_terms` as lists, for the few-match measure; None when some word has more
        than :data:`FEW_TERMS` terms (a wide typo or prefix expansion: the vectorised measure)."""
        word_terms = [self.matcher.term_id_list(word) for word in self.words]
        if max(map(len, word_terms)) > FEW_TERMS:
            return None
        if not self.matcher.typo_disabled_fields:
            return word_terms, word_terms
        return word_terms, [self.matcher.term_id_list(word, typo_free=True) for word in self.words]

    def _proximity_costs(self, docs: np.ndarray, word_terms: list[np.ndarray], typo_free_terms: list[np.ndarray],
                         candidates: AbstractBitMap) -> np.ndarray:
        """:meth:`proximity_costs` of many docs, vectorised: per word pair, one merge of both words'
        tokens in every searched field (a doc's closest pair over its fields)."""
        pair_count = len(self.words) - 1
        disabled = self.matcher.typo_disabled_fields
        tokens: list[list[FieldTokens]] = [[] for _word in self.words]
        # One mask of every candidate, shared by the lookups that take one: a word's tokens in
        # candidates not looked up pair with nothing (they do not hold the word's neighbours there).
        mask = DocMask(docs)
        for field_slot, field in enumerate(self.matcher.fields):
            postings = self.matcher.index.postings.get(field)
            if postings is None:
                continue
            terms_here = typo_free_terms if field in disabled else word_terms
            # Positions are read only in the docs that may hold both words of a pair in this field
            # (the field's word bitmaps say which, at an intersection each): in the others the
            # pair costs the cap, and a common word's lookups cost per doc looked up.
            holding_pairs = self._pair_docs(field_slot, candidates)
            looked_up: dict[int, np.ndarray] = {}
            for position, terms in enumerate(terms_here):
                around = [holding_pairs[pair] for pair in (position - 1, position) if 0 <= pair < pair_count]
                within = around[0] if len(around) == 1 or around[0] is around[1] else union_all(around)
                if not within:
                    continue
                if id(within) not in looked_up:
                    looked_up[id(within)] = docs if len(within) == docs.size else array_from_bitmap(within)
                found_docs, found_positions = postings.occurrences_in(terms, looked_up[id(within)], mask,
                                                                      WHOLE_TOKENS)
                if found_docs.size:
                    tokens[position].append((field_slot, found_docs, found_positions))
        best = np.full((pair_count, docs.size), PROXIMITY_CAP, dtype=np.int64)
        for pair in range(pair_count):
            measured = pair_costs(tokens[pair], tokens[pair + 1], len(self.matcher.fields))
            if measured is None:
                continue
            pair_docs, costs = measured
            slots = np.searchsorted(docs, pair_docs)
            # A rare word's tokens were read whole: the pairs in docs that are not candidates go.
            np.minimum(slots, docs.size - 1, out=slots)
            costs[docs[slots] != pair_docs] = PROXIMITY_CAP
            np.minimum.at(best[pair], slots, costs)  # a doc's least over its fields
        summed: np.ndarray = best[0] if pair_count == 1 else best.sum(axis=0)
        return summed

    def _few_attribute_costs(self, docs: list[int]) -> list[int]:
        """The attribute rule's packed cost of each of a few docs: :meth:`attribute_buckets` told
        per doc by membership tests (a bucket walk made and subtracted bitmaps for each field)."""
        field_count = len(self.matcher.fields)
        costs = [min(2 * field_count, 255) << 8] * len(docs)
        left = list(range(len(docs)))
        for offset, parts in self._attribute_passes():
            unplaced = []
            for slot in left:
                doc = docs[slot]
                for position in range(field_count):
                    if any(doc in word_parts[position] for word_parts in parts):
                        costs[slot] = min(offset + position, 255) << 8
                        break
                else:
                    unplaced.append(slot)
            left = unplaced
            if not left:
                break
        return costs

    def _few_proximity_costs(self, doc_list: list[int], word_terms: list[list[int]],
                             typo_free_terms: list[list[int]], candidates: AbstractBitMap) -> list[int]:
        """:meth:`proximity_costs` of a few docs (ascending), in plain Python over each doc's positions."""
        docs = FewDocs(doc_list)  # shared by every positions_in below
        pair_count = len(self.words) - 1
        best = [[PROXIMITY_CAP] * len(doc_list) for _pair in range(pair_count)]
        disabled = self.matcher.typo_disabled_fields
        for field_slot, field in enumerate(self.matcher.fields):
            postings = self.matcher.index.postings.get(field)
            if postings is None:
                continue
            terms_here = typo_free_terms if field in disabled else word_terms
            # A word's positions are read only when the word before it occurs here (lazily, left to right).
            held: list[dict[int, list[int]] | None] = [None] * len(self.words)
            for pair in range(pair_count):
                if not any(best[pair]):
                    continue  # every doc has the pair side by side already: no field can do better
                left = held[pair]
                if left is None:
                    left = held[pair] = (postings.positions_in(terms_here[pair], docs)
                                         if self._present(self.words[pair], field_slot, candidates) else {})
                if not left:
                    continue
                right = held[pair + 1] = (postings.positions_in(terms_here[pair + 1], docs)
                                          if self._present(self.words[pair + 1], field_slot, candidates) else {})
                row = best[pair]
                for slot, right_positions in right.items():
                    left_positions = left.get(slot)
                    if left_positions is None:
                        continue
                    if len(left_positions) == 1 and len(right_positions) == 1:  # most often: one each
                        gap = right_positions[0] - left_positions[0]
                        # As _closest: in reading order the gap less one (none when 0 or 1), reversed the gap.
                        cost = min((gap - 1 if gap > 1 else 0) if gap >= 0 else -gap, PROXIMITY_CAP)
                    else:
                        cost = _closest(left_positions, right_positions)
                    if cost < row[slot]:
                        row[slot] = cost
        return best[0] if pair_count == 1 else [sum(pairs) for pairs in zip(*best)]

    def _pair_docs(self, field_slot: int, candidates: AbstractBitMap) -> list[AbstractBitMap]:
        """Per consecutive word pair, those of ``candidates`` that may hold both words in the
        searched field at ``field_slot`` (all of them for a word whose field docs are unknown; see
        :meth:`_field_part`)."""
        held = [self._field_part(word, field_slot) for word in self.words]
        pairs: list[AbstractBitMap] = []
        for left, right in pairwise(held):
            # Tests and counts first, making no bitmap: in most fields at most one of the two words
            # occurs, and where both do, most often in most candidates (then all are looked up, as
            # they are when too few for the lookups of the others to cost more than the counts).
            if (left is not None and not left.intersect(candidates)) or (
                    right is not None and not right.intersect(candidates)):
                pairs.append(EMPTY)
            elif left is None or right is None or len(candidates) < PAIR_DOCS_MIN or min(
                    candidates.intersection_cardinality(left),
                    candidates.intersection_cardinality(right)) * 4 >= len(candidates) * 3:
                pairs.append(candidates)
            else:
                pairs.append(candidates & left & right)
        return pairs

    def _field_part(self, word: WordPlan, field_slot: int) -> AbstractBitMap | None:
        """The docs that may hold ``word``'s terms in the searched field at ``field_slot``; None
        when unknown (a word whose multi-word synonyms' words its bitmaps do not cover)."""
        if word.synonyms and word.phrase_synonyms():
            return None
        return self.matcher.field_parts(word, word.max_typos)[field_slot]

    def _present(self, word: WordPlan, field_slot: int, candidates: AbstractBitMap) -> bool:
        """Whether some of ``candidates`` may hold ``word``'s terms in the searched field at
        ``field_slot`` (True when unknown, see :meth:`_field_part`)."""
        part = self._field_part(word, field_slot)
        return part is None or bool(part.intersect(candidates))

    def all_costs(self, candidates: AbstractBitMap) -> tuple[np.ndarray, np.ndarray]:
        """(docs, packed cost) for every candidate: what an explicit sort needs for ``_rank``."""
        docs = array_from_bitmap(candidates)
        # Each rule gives every doc one cost: its byte of the packed cost is added bucket by bucket.
        packed = np.zeros(docs.size, dtype=np.int64)
        for added, bucket in self._bucket_costs(candidates):
            if len(bucket) == docs.size:
                packed += added
            else:
                packed[np.searchsorted(docs, array_from_bitmap(bucket))] += added
        if len(self.words) >= 2 and docs.size:
            packed += np.minimum(self.proximity_costs(docs, candidates), 255) << 16
        return docs, packed

    def _bucket_costs(self, candidates: AbstractBitMap, attribute: bool = True) -> Iterator[tuple[int, AbstractBitMap]]:
        """(packed cost, bucket) of every bucket of the typo, attribute (unless not ``attribute``)
        and exactness rules that costs something: each rule's cost in its byte of the packed cost.
        Proximity comes after, from its callers: the attribute rule has then looked up each
        word's docs per field, which proximity asks for again (memoised) to skip the fields a
        word is not in."""
        # A rule that gives every candidate cost 0 is not walked: for a rare word's handful of
        # matches the walk costs more generator steps and bitmap tests than the ranking itself.
        rules: list[tuple[int, Rule]] = []
        if self._typos_differ():
            rules.append((24, self.typo_buckets))
        if attribute and self._fields_differ():
            rules.append((8, self.attribute_buckets))
        if self._inexact_words():
            rules.append((0, self.exactness_buckets))
        for shift, rule in rules:
            for cost, bucket in rule(candidates):
                if cost:
                    yield min(cost, 255) << shift, bucket

    def few_costs(self, candidates: AbstractBitMap) -> tuple[list[int], list[int]]:
        """:meth:`all_costs` of at most :data:`FEW_DOCS` candidates, as plain lists: for a handful
        of docs each numpy call (a dozen per query) costs more than the docs it scores."""
        docs = list(candidates)
        packed = self._few_attribute_costs(docs) if self._fields_differ() else [0] * len(docs)
        slot_of: dict[int, int] | None = None
        for added, bucket in self._bucket_costs(candidates, attribute=False):
            if len(bucket) == len(docs):
                packed = [value + added for value in packed]
                continue
            if slot_of is None:
                slot_of = {doc: slot for slot, doc in enumerate(docs)}
            for doc in bucket:
                packed[slot_of[doc]] += added
        if len(self.words) >= 2 and docs:
            few_terms = self._few_word_terms()
            if few_terms is not None:
                proximity = self._few_proximity_costs(docs, *few_terms, candidates)
            else:  # a wide typo or prefix expansion: the vectorised measure
                proximity = self._proximity_costs(np.asarray(docs, dtype=np.uint32), *self._word_terms(),
                                                  candidates).tolist()
            packed = [value + (min(cost, 255) << 16) for value, cost in zip(packed, proximity)]
        return docs, packed


#: One word's tokens in one searched field: (field slot, docs, positions), in any order.
FieldTokens = tuple[int, np.ndarray, np.ndarray]


def pair_costs(left: list[FieldTokens], right: list[FieldTokens],
               field_count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Proximity costs of two consecutive query words in the docs holding both in one field: (docs,
    costs), a doc possibly more than once (a doc's cost is its least); None when no doc holds both.

    The cost is the closest two tokens' distance less one, capped at :data:`PROXIMITY_CAP`: in
    reading order the position difference (at least 1), reversed one more. Both words' tokens are
    merged in (doc, field, position) order as one sort key each — doc id in the high 32 bits, then
    the field slot, the position, and a low bit set on the left word's tokens — so only neighbours in
    that order can be closest, and half their keys' difference (odd: the side bits differ) is the
    cost: a right token g after a left one differs by 2g - 1 (cost g - 1), one g before it by 2g + 1.
    """
    if not left or not right:
        return None
    field_bits = (field_count - 1).bit_length()
    position_bits = 31 - field_bits
    if sum(docs.size for _slot, docs, _positions in left + right) <= _SMALL_PAIR_TOKENS:
        return _pair_costs_small(_keys(left, position_bits).tolist(), _keys(right, position_bits).tolist(),
                                 position_bits + 1, field_bits)
    if not all(positions.dtype == np.uint16 or int(positions.max()) < 1 << position_bits
               for _slot, _docs, positions in left + right):
        return _pair_costs_unpacked(left, right, field_count)
    keys = np.concatenate((_keys(left, position_bits) | np.uint64(1), _keys(right, position_bits)))
    keys.sort()
    # Neighbours from the two words in one doc and field: keys equal but in position bits and side bit.
    neighbours = np.flatnonzero(((keys[1:] ^ keys[:-1]) & np.uint64(_outside_positions(position_bits))) == 1)
    if not neighbours.size:
        return None
    costs = np.minimum(np.diff(keys)[neighbours].view(np.int64) >> 1, PROXIMITY_CAP)
    return (keys[neighbours + 1] >> np.uint64(32)).astype(np.uint32), costs


def _keys(tokens: list[FieldTokens], position_bits: int) -> np.ndarray:
    """The sort keys of :func:`pair_costs` (side bit clear) of one word's tokens, field after field."""
    parts = []
    for slot, docs, positions in tokens:
        keys = np.left_shift(docs, 32, dtype=np.uint64)
        keys |= np.left_shift(positions, 1, dtype=np.uint64)
        if slot:
            keys |= np.uint64(slot << (position_bits + 1))
        parts.append(keys)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _outside_positions(position_bits: int) -> int:
    """The bits of a :func:`pair_costs` key that are not its position's."""
    return ((1 << 64) - 1) ^ (((1 << position_bits) - 1) << 1)


def _pair_costs_small(left: list[int], right: list[int], group_shift: int,
                      field_bits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`pair_costs` of a few tokens' keys, pair by pair in Python (cheaper than the dozen
    numpy calls of the merge): tokens of one doc and field share the key bits above ``group_shift``."""
    lefts: dict[int, list[int]] = {}
    for key in left:
        lefts.setdefault(key >> group_shift, []).append(key | 1)
    best: dict[int, int] = {}
    for key in right:
        group = key >> group_shift
        for left_key in lefts.get(group, ()):
            cost = min(abs(key - left_key) >> 1, PROXIMITY_CAP)
            if cost < best.get(group, PROXIMITY_CAP + 1):
                best[group] = cost
    if not best:
        return None
    groups = sorted(best)
    return (np.asarray([group >> field_bits for group in groups], dtype=np.uint32),
            np.asarray([best[group] for group in groups], dtype=np.int64))


def _pair_costs_unpacked(left: list[FieldTokens], right: list[FieldTokens],
                         field_count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`pair_costs` for positions too large to pack with doc and field in 64 bits (fields of
    tens of millions of tokens): the same merge over (doc and field, position and side) columns."""
    groups = np.concatenate([docs.astype(np.int64) * field_count + slot for slot, docs, _positions in left + right])
    sides = np.concatenate([np.full(docs.size, side, dtype=np.int64)
                            for side, tokens in ((1, left), (0, right)) for _slot, docs, _positions in tokens])
    lows = np.concatenate([positions for _slot, _docs, positions in left + right]).astype(np.int64) * 2 + sides
    order = np.lexsort((lows, groups))
    groups, lows = groups[order], lows[order]
    neighbours = np.flatnonzero((groups[1:] == groups[:-1]) & (((lows[1:] ^ lows[:-1]) & 1) == 1))
    if not neighbours.size:
        return None
    costs = np.minimum((lows[neighbours + 1] - lows[neighbours]) >> 1, PROXIMITY_CAP)
    return (groups[neighbours + 1] // field_count).astype(np.uint32), costs


#: From this many candidates, the proximity rule looks a pair's words up only in the docs that
#: may hold both in a field (when fewer than three in four do): cheaper than the counts below it.
PAIR_DOCS_MIN = 256

#: A word of one term with at most this many tokens in a field is read whole for the proximity
#: rule (other docs' tokens included, dropped after): cheaper than looking the candidates up in it.
WHOLE_TOKENS = 2048

#: Match sets of at most this many docs, of words with at most :data:`FEW_TERMS` terms each (no
#: wide typo or prefix expansion), take their proximity from per-doc position lists in Python.
FEW_DOCS = 48
FEW_TERMS = 4


def _closest(left: list[int], right: list[int]) -> int:
    """Proximity cost of one doc's positions of two words (each ascending, neither empty): the
    smallest distance over all pairs, minus one, capped — as :func:`pair_costs` measures it.
    One merge of the two lists: the closest pair is adjacent in position order."""
    best = PROXIMITY_CAP + 1
    left_at = right_at = 0
    left_end, right_end = len(left), len(right)
    here, there = left[0], right[0]
    while True:
        if there >= here:  # the right word after the left one: reading order, the gap (at least 1)
            gap = there - here
            if gap < best:
                best = gap if gap > 1 else 1
                if best == 1:
                    break
            left_at += 1
            if left_at == left_end:
                break
            here = left[left_at]
        else:  # the right word first: one more
            if here - there + 1 < best:
                best = here - there + 1
            right_at += 1
            if right_at == right_end:
                break
            there = right[right_at]
    return min(best - 1, PROXIMITY_CAP)


#: Up to this many tokens of two words, their distances are measured pair by pair in Python:
#: cheaper than the dozen numpy calls of the merge for the few positions of a few docs.
_SMALL_PAIR_TOKENS = 48


def order_by_id(docstore: DocStore, bucket: AbstractBitMap, start: int, stop: int) -> list[int]:
    """Docs ``start:stop`` of ``bucket`` in record id order."""
    rank = docstore.id_rank()
    if rank is None:  # doc order is record id order: slice the bitmap directly
        return list(bucket[start:stop]) if start < stop else []
    docs = array_from_bitmap(bucket)
    keys = rank[docs]
    if stop < docs.size // 4:
        top = np.argpartition(keys, stop - 1)[:stop] if stop else np.empty(0, np.int64)
        top = top[np.argsort(keys[top], kind="stable")]
    else:
        top = np.argsort(keys, kind="stable")
    ordered: list[int] = docs[top[start:stop]].tolist()
    return ordered


#: Orders docs ``start:stop`` of a last-rule bucket (default: :func:`order_by_id`).
BucketOrder = Callable[[DocStore, AbstractBitMap, int, int], list[int]]


def bucket_sort(
    candidates: AbstractBitMap, rules: list[Rule], docstore: DocStore, skip: int, count: int,
    order: BucketOrder = order_by_id,
) -> list[tuple[int, tuple[int, ...]]]:
    """The docs of page ``skip:skip+count`` of ``candidates`` with their rule costs; equally
    relevant docs (one bucket of the last rule) come in ``order`` (record id, or the settings'
    ``customRanking`` then record id)."""
    placed: list[tuple[int, tuple[int, ...]]] = []
    skipped = 0
    #: Lone docs placed before the last rule, by the depth they were placed at: their remaining
    #: costs are scored together after the walk (a rule's cost of a doc never depends on the other
    #: docs it is given), one call per rule instead of one per doc.
    deferred: dict[int, list[int]] = {}
    # Iterative depth-first walk; each stack frame is (depth, costs so far, bucket iterator).
    stack: list[tuple[int, tuple[int, ...], Iterator[tuple[int, AbstractBitMap]]]] = []

    def place(bucket: AbstractBitMap, costs: tuple[int, ...]) -> None:
        nonlocal skipped
        start = skip - skipped
        stop = start + (count - len(placed))
        ordered = order(docstore, bucket, max(start, 0), min(stop, len(bucket)))
        skipped += min(len(bucket), max(start, 0))
        padded = costs + (0,) * (len(rules) - len(costs))
        placed.extend((doc, padded) for doc in ordered)

    def visit(bucket: AbstractBitMap, depth: int, costs: tuple[int, ...]) -> None:
        nonlocal skipped
        if skipped + len(bucket) <= skip:
            skipped += len(bucket)
        elif depth == len(rules):
            place(bucket, costs)
        elif len(bucket) == 1:
            # Placed early, but its _rank must still tell its true costs: scored after the walk.
            deferred.setdefault(depth, []).append(len(placed))
            place(bucket, costs)
        else:
            stack.append((depth, costs, rules[depth](bucket)))

    if count == 0 or not candidates:
        return placed
    visit(candidates, 0, ())
    while stack and len(placed) < count:
        depth, costs, buckets = stack[-1]
        step = next(buckets, None)
        if step is None:
            stack.pop()
            continue
        cost, bucket = step
        visit(bucket, depth + 1, costs + (cost,))
    for depth, slots in deferred.items():
        slots = [slot for slot in slots if slot < len(placed)]
        docs = BitMap([placed[slot][0] for slot in slots])
        rest: dict[int, list[int]] = {doc: [] for doc in docs}
        for rule in rules[depth:]:
            for cost, bucket in rule(docs):
                for doc in bucket:
                    rest[doc].append(cost)
        for slot in slots:
            doc, costs = placed[slot]
            placed[slot] = (doc, costs[:depth] + tuple(rest[doc]))
    return placed


def bucket_places(
    candidates: AbstractBitMap, rules: list[Rule], docstore: DocStore, targets: AbstractBitMap,
    order: BucketOrder = order_by_id,
) -> dict[int, int]:
    """The 1-based place of each doc of ``targets`` (docs of ``candidates``) in the order
    :func:`bucket_sort` pages ``candidates`` in, found by splitting only the buckets that hold one
    of them: a bucket without one is counted, not ordered (a hybrid search needs the keyword
    places of its k nearest, not the order of every keyword match)."""
    places: dict[int, int] = {}
    wanted = len(targets)
    before = 0  # docs ordered before the bucket visited
    stack: list[tuple[int, Iterator[tuple[int, AbstractBitMap]]]] = []
    by_doc_order = order is order_by_id and docstore.id_rank() is None

    def visit(bucket: AbstractBitMap, depth: int) -> None:
        nonlocal before
        held = bucket & targets
        if held:
            if len(bucket) == 1:
                places[bucket.min()] = before + 1
            elif depth == len(rules):
                if by_doc_order:  # the bucket's own order: a doc's place in it is its rank
                    places.update((doc, before + bucket.rank(doc)) for doc in held)
                else:
                    ordered = order(docstore, bucket, 0, len(bucket))
                    places.update((doc, before + place) for place, doc in enumerate(ordered, 1) if doc in held)
            else:
                stack.append((depth, rules[depth](bucket)))
                return
        before += len(bucket)

    if not targets:
        return places
    visit(candidates, 0)
    while stack and len(places) < wanted:
        depth, buckets = stack[-1]
        step = next(buckets, None)
        if step is None:
            stack.pop()
            continue
        _cost, bucket = step
        visit(bucket, depth + 1)
    return places

# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Lexicon mode with skeleton indexing (the README's lexicon mode).

Theory of operation. Most tokens are ``[separators] letters [separators]``. Whether such a
token is allowed depends only on the automaton state and on its *skeleton*: its letters,
case folded, plus two flags (a leading separator needs the current word to be complete and
restarts at the root; a trailing one needs the letters to end a word). Tokens are grouped
by skeleton once per vocabulary, and the skeletons form a trie. A mask is then one joint
walk of the skeleton trie and the word trie from the current word's node: each skeleton is
looked at once, not each token, and only skeletons that continue the current word are
visited. The walks from the root (between words, and after a leading separator) are the
same at every step and are computed once per (lexicon, vocabulary). The rare tokens with
letters on both sides of a separator are checked byte by byte.
"""

import weakref

import numpy as np

from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.stdlib cimport free, malloc

from .automaton cimport CompiledGrammar
from .trie cimport TokenTrie, TrieTables

from ..ir import EDGE_BYTE

#: Bytes that separate words: spaces, newlines and ``. , ; : ! ? ' " ( ) -``.
SEPARATORS = b" \n.,;:!?'\"()-"

cdef uint8_t WORD = 0, SEP = 1, NEVER = 2
cdef uint8_t BYTE_CLASS[256]
for _b in range(256):
    BYTE_CLASS[_b] = SEP if _b in SEPARATORS else (NEVER if _b < 0x20 or _b == 0x7F or 0x30 <= _b <= 0x39 else WORD)
BYTE_CLASS[EDGE_BYTE] = NEVER  # no text holds it: token edges (``ir.token``) are never words


cdef inline uint8_t _fold(uint8_t b) noexcept nogil:
    return b + 32 if 0x41 <= b <= 0x5A else b


def fold(bytes word):
    """ASCII case folding, as the lexicon matches words."""
    return word.lower() if word.isascii() else bytes(_fold(b) for b in word)


def _trivial_arrays():
    z = np.zeros(1, np.int32)
    return {"b_start": np.zeros(2, np.int32), "b_lo": np.zeros(0, np.uint8), "b_hi": np.zeros(0, np.uint8),
            "b_tgt": z, "b_ws": np.zeros(0, np.uint8), "x_start": np.zeros(2, np.int32), "x_kind": z, "x_arg": z,
            "x_tgt": z, "final": np.ones(1, np.uint8), "state_rule": z, "rule_start": z, "rule_min": z,
            "rule_max": z}


cdef class CompiledLexicon(CompiledGrammar):
    """A word list as an automaton; ``Matcher`` recognizes it and uses the skeleton index for masks."""

    def __init__(self, words, list warnings, limits):
        folded = sorted({fold(bytes(w)) for w in words})
        usable = [w for w in folded if w and all(BYTE_CLASS[b] == WORD for b in w)]
        super().__init__(_trivial_arrays(), -1, ["lexicon"], list(warnings), limits)
        self.words = TokenTrie(usable, len(usable), ())
        self.n_words = len(usable)

    cdef int32_t child(self, int32_t node, uint8_t byte) noexcept nogil:
        """The word-trie child of ``node`` (-1: the root) along ``byte``, or -1."""
        cdef const TrieTables* w = &self.words.tr
        cdef int32_t j = node + 1, end = w.n_nodes if node < 0 else node + w.node_size[node]
        while j < end:
            if w.node_byte[j] == byte:
                return j
            if w.node_byte[j] > byte:
                return -1
            j += w.node_size[j]
        return -1

    cdef bint accepting(self, int32_t state) noexcept nogil:
        return state == LEX_SEP or self.words.tr.node_tok[state] > self.words.tr.node_tok[state - 1]

    cdef int32_t step(self, int32_t state, uint8_t byte) noexcept nogil:
        cdef uint8_t kind = BYTE_CLASS[byte]
        cdef int32_t c
        if kind == SEP:
            return LEX_SEP if self.accepting(state) else LEX_REJECT
        if kind == NEVER:
            return LEX_REJECT
        c = self.child(state - 1, _fold(byte))
        return c + 1 if c >= 0 else LEX_REJECT

    def __repr__(self):
        return f"CompiledLexicon(words={self.n_words})"


cdef class SkeletonIndex:
    """Tokens grouped by skeleton, for one vocabulary (shared by every lexicon)."""

    def __init__(self, vocab):
        groups = {}
        pure, complex_ = [], []
        for i in range(vocab.size):
            piece = vocab.grammar_bytes(i)  # as accept_token steps it: a token edge is no word
            if not piece or any(BYTE_CLASS[b] == NEVER for b in piece):
                continue
            j = 0
            while j < len(piece) and BYTE_CLASS[piece[j]] == SEP:
                j += 1
            k = j
            while k < len(piece) and BYTE_CLASS[piece[k]] == WORD:
                k += 1
            if j == len(piece):
                pure.append(i)
            elif any(BYTE_CLASS[b] == WORD for b in piece[k:]):
                complex_.append(i)
            else:
                groups.setdefault(fold(piece[j:k]), [[], [], [], []])[(j > 0) * 2 + (k < len(piece))].append(i)
        skeletons = sorted(groups)
        starts = [0]
        tokens = []
        for s in skeletons:
            for variant in groups[s]:
                tokens.extend(variant)
                starts.append(len(tokens))
        self.skeletons = TokenTrie(skeletons, len(skeletons), ())
        self._arrays = {
            "group_start": np.array(starts, np.int32),
            "group_tokens": np.array(tokens or [0], np.int32),
            "pure_sep": np.array(pure or [0], np.int32),
            "complex": np.array(complex_ or [0], np.int32),
        }
        self.group_start = <const int32_t*> <size_t> self._arrays["group_start"].ctypes.data
        self.group_tokens = <const int32_t*> <size_t> self._arrays["group_tokens"].ctypes.data
        self.pure_sep = <const int32_t*> <size_t> self._arrays["pure_sep"].ctypes.data
        self.n_pure_sep = len(pure)
        self.complex_tok = <const int32_t*> <size_t> self._arrays["complex"].ctypes.data
        self.n_complex = len(complex_)

    @property
    def n_skeletons(self):
        return self.skeletons.tr.n_tokens


_INDEXES = weakref.WeakKeyDictionary()


def skeleton_index(vocab):
    """The vocabulary's skeleton index, built on first use and cached (about a second for 262k tokens)."""
    index = _INDEXES.get(vocab)
    if index is None:
        index = _INDEXES[vocab] = SkeletonIndex(vocab)
    return index


cdef inline void _set_group(SkeletonIndex ix, int32_t group, uint32_t* out) noexcept nogil:
    cdef int32_t k, t
    for k in range(ix.group_start[group], ix.group_start[group + 1]):
        t = ix.group_tokens[k]
        out[t >> 5] |= (<uint32_t> 1) << (t & 31)


cdef class LexiconMasks:
    """Masks of one (lexicon, vocabulary) pair; the two walks from the root are computed once."""

    def __init__(self, CompiledLexicon lex, vocab):
        cdef int32_t words = (vocab.size + 31) // 32, k, t
        cdef TokenTrie trie = vocab.trie
        self.lex = lex
        self.index = skeleton_index(vocab)
        self.trie = trie
        self.tr = &trie.tr
        self.n_words = words
        self.stack = <int32_t*> malloc((self.index.skeletons.tr.max_depth + 2) * sizeof(int32_t))
        if self.stack == NULL:
            raise MemoryError("lexicon walk stack")
        plain = np.zeros(words, np.uint32)
        lead = np.zeros(words, np.uint32)
        cdef uint32_t[::1] p = plain, l = lead
        with nogil:
            self._walk(-1, 0, &p[0])
            self._walk(-1, 2, &l[0])
            for k in range(self.index.n_pure_sep):
                t = self.index.pure_sep[k]
                l[t >> 5] |= (<uint32_t> 1) << (t & 31)
        self._root_plain = plain
        self._root_lead = lead
        self.plain = <const uint32_t*> <size_t> plain.ctypes.data
        self.lead = <const uint32_t*> <size_t> lead.ctypes.data

    def __dealloc__(self):
        free(self.stack)

    cdef void _walk(self, int32_t node, int32_t variant, uint32_t* out) noexcept nogil:
        """Joint walk of the skeleton trie and the word trie from word node ``node`` (-1: the root)."""
        cdef const TrieTables* sk = &self.index.skeletons.tr
        cdef const TrieTables* wt = &self.lex.words.tr
        cdef int32_t i = 0, d, w, k, s
        self.stack[0] = node
        while i < sk.n_nodes:
            d = sk.node_depth[i]
            w = self.lex.child(self.stack[d - 1], sk.node_byte[i])
            if w < 0:
                i += sk.node_size[i]
                continue
            self.stack[d] = w
            for k in range(sk.node_tok[i], sk.node_tok[i + 1]):
                s = sk.tok_ids[k]
                _set_group(self.index, s * 4 + variant, out)
                if wt.node_tok[w + 1] > wt.node_tok[w]:  # the letters end a word: a trailing separator may follow
                    _set_group(self.index, s * 4 + variant + 1, out)
            i += 1

    cdef void fill(self, int32_t state, uint32_t* out) noexcept nogil:
        cdef const uint32_t* plain = self.plain
        cdef const uint32_t* lead = self.lead
        cdef int32_t w, k, t, s, p
        if state == LEX_SEP:
            for w in range(self.n_words):
                out[w] |= plain[w] | lead[w]
        else:
            self._walk(state - 1, 0, out)
            if self.lex.accepting(state):
                for w in range(self.n_words):
                    out[w] |= lead[w]
        for k in range(self.index.n_complex):
            t = self.index.complex_tok[k]
            s = state
            for p in range(self.tr.bytes_off[t], self.tr.bytes_off[t + 1]):
                s = self.lex.step(s, self.tr.tok_bytes[p])
                if s == LEX_REJECT:
                    break
            if s != LEX_REJECT:
                out[t >> 5] |= (<uint32_t> 1) << (t & 31)


def masks_for(CompiledLexicon lex, vocab):
    caches = lex._mask_caches
    if caches is None:
        caches = lex._mask_caches = weakref.WeakKeyDictionary()
    masks = caches.get(vocab)
    if masks is None:
        masks = caches[vocab] = LexiconMasks(lex, vocab)
    return masks

// The word index behind the search box: every note's words (title, body, tags), kept up to
// date as notes change, so that a search never scans note bodies. A query matches the notes
// that contain every one of its words as a prefix of one of theirs, like the native client's
// search (docs/client.md): words are runs of letters and digits, compared without case and
// without diacritics ("Café" is found by "cafe").
//
// Notes are numbered (`doc`, a small integer the caller gives each note for good); the index
// keeps, per word, the sorted list of notes holding it, and per note its words, so that a
// changed note costs the words it gained and lost, not a rebuild.

const ASCII = /^[\x00-\x7f]*$/;
const WORD = /[\p{L}\p{N}]+/gu;
const ASCII_WORD = /[a-z0-9]+/g;
const MAX_WORD = 64; // longer runs are cut: nobody types them, and they would bloat the index

/** The distinct words of `text`, lower-cased, without diacritics. */
export function words(text) {
  let s = text.toLowerCase();
  let found;
  if (ASCII.test(s)) {
    found = s.match(ASCII_WORD);
  } else {
    s = s.normalize("NFD").replace(/\p{M}+/gu, "");
    found = s.match(WORD);
  }
  if (!found) return [];
  const out = new Set();
  for (const w of found) out.add(w.length > MAX_WORD ? w.slice(0, MAX_WORD) : w);
  return [...out];
}

/** A 32-bit FNV-1a hash: whether a note's text changed, without keeping the text. */
function hash(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) ^ text.length;
}

/** Index of the first element of sorted `list` not less than `x` (numbers or strings). */
function lowerBound(list, x, key = (v) => v) {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (key(list[mid]) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class SearchIndex {
  constructor() {
    this.wordIds = new Map(); // word -> word number
    this.wordList = []; // word number -> word
    this.postings = []; // word number -> sorted array of docs holding it
    this.docWords = []; // doc -> Int32Array of its word numbers, sorted (undefined: not indexed)
    this.docHash = []; // doc -> hash of the text indexed
    this.byWord = []; // word numbers sorted by their word: prefix ranges by binary search
    this.unsorted = []; // word numbers not yet in byWord
    this.docCount = 0; // one more than the highest doc seen
    this.stamp = null; // scratch for match(): per doc, the last query word that reached it
    this.stampValue = 0;
  }

  /** Indexes `text` as note `doc`'s (replacing what it had); cheap when the text is unchanged. */
  set(doc, text) {
    const h = hash(text);
    if (this.docWords[doc] && this.docHash[doc] === h) return false;
    const next = new Int32Array(words(text).map((w) => this.wordId(w))).sort();
    this.replace(doc, next);
    this.docHash[doc] = h;
    return true;
  }

  /** Forgets note `doc`. */
  delete(doc) {
    if (!this.docWords[doc]) return;
    this.replace(doc, new Int32Array(0));
    this.docWords[doc] = undefined;
    this.docHash[doc] = undefined;
  }

  has(doc) {
    return Boolean(this.docWords[doc]);
  }

  wordId(word) {
    let id = this.wordIds.get(word);
    if (id === undefined) {
      id = this.wordList.length;
      this.wordIds.set(word, id);
      this.wordList.push(word);
      this.postings.push([]);
      this.unsorted.push(id);
    }
    return id;
  }

  /** Moves `doc` from the words it had to `next` (both sorted): only the difference is touched. */
  replace(doc, next) {
    if (doc >= this.docCount) this.docCount = doc + 1;
    const old = this.docWords[doc] || new Int32Array(0);
    let i = 0;
    let j = 0;
    while (i < old.length || j < next.length) {
      if (j >= next.length || (i < old.length && old[i] < next[j])) {
        const list = this.postings[old[i++]];
        const at = lowerBound(list, doc);
        if (list[at] === doc) list.splice(at, 1);
      } else if (i >= old.length || next[j] < old[i]) {
        const list = this.postings[next[j++]];
        if (list.length === 0 || list[list.length - 1] < doc) list.push(doc);
        else {
          const at = lowerBound(list, doc);
          if (list[at] !== doc) list.splice(at, 0, doc);
        }
      } else {
        i++;
        j++;
      }
    }
    this.docWords[doc] = next;
  }

  /** byWord brought up to date with the words added since the last search. */
  sortWords() {
    if (this.unsorted.length === 0) return;
    const word = (id) => this.wordList[id];
    if (this.unsorted.length > 256) {
      this.byWord = this.wordList.map((_, id) => id).sort((a, b) => (word(a) < word(b) ? -1 : 1));
    } else {
      for (const id of this.unsorted) this.byWord.splice(lowerBound(this.byWord, word(id), word), 0, id);
    }
    this.unsorted = [];
  }

  /**
   * The notes matching `query`: a Uint8Array over docs (1: matches), or null when the query
   * holds no word at all (then nothing matches; the caller tells an empty query apart).
   */
  match(query) {
    const terms = words(query).slice(0, 250); // hits[] counts terms in a byte
    if (terms.length === 0) return null;
    this.sortWords();
    const n = this.docCount;
    if (!this.stamp || this.stamp.length < n) {
      this.stamp = new Uint32Array(Math.max(n, 1024) * 2);
      this.stampValue = 0;
    }
    const hits = new Uint8Array(n);
    const stamp = this.stamp;
    const word = (id) => this.wordList[id];
    terms.forEach((term, k) => {
      const mark = ++this.stampValue;
      for (let at = lowerBound(this.byWord, term, word); at < this.byWord.length; at++) {
        const w = this.wordList[this.byWord[at]];
        if (!w.startsWith(term)) break;
        for (const doc of this.postings[this.byWord[at]]) {
          if (stamp[doc] !== mark && hits[doc] === k) {
            stamp[doc] = mark;
            hits[doc] = k + 1;
          }
        }
      }
    });
    const want = terms.length;
    for (let doc = 0; doc < n; doc++) hits[doc] = hits[doc] === want ? 1 : 0;
    return hits;
  }
}

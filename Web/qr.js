// A QR Code encoder (ISO/IEC 18004:2015), for the two-factor setup's otpauth:// URI: the text
// as UTF-8 in byte mode, error correction level M, the smallest version (1 to 40) that holds
// it, and the mask of the lowest penalty (or the one asked for). Drawn as SVG: no canvas and no
// image URL, so nothing the page's content security policy would have to allow.
//
// Section and table numbers below are the standard's.

// Table 9, level M: error correction codewords per block, and blocks, by version (index 0 unused).
const EC_PER_BLOCK = [0, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26,
  26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28];
const EC_BLOCKS = [0, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16,
  17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49];
const LEVEL_M = 0b00; // the error correction level's two bits in the format information (Table 12)
const BYTE_MODE = 0b0100;
const PAD = [0xec, 0x11]; // the pad codewords, in turn (7.4.10)
export const QUIET_ZONE = 4; // modules of light margin on each side (6.3.8)

/** How many modules carry data and error correction (everything but the function patterns). */
function rawModules(version) {
  const side = 17 + 4 * version;
  let count = side * side - 3 * 64 - 2 * (side - 16) - 31; // finders with separators, timing, format and the dark module
  if (version >= 2) {
    const n = Math.floor(version / 7) + 2; // alignment patterns per row: n * n less the 3 on finders
    count -= 25 * (n * n - 3) - 10 * (n - 2); // those on the timing lines share 5 modules with them
  }
  if (version >= 7) count -= 36; // the two version information blocks
  return count;
}

/** Data codewords of a version at level M. */
function dataCodewords(version) {
  return Math.floor(rawModules(version) / 8) - EC_PER_BLOCK[version] * EC_BLOCKS[version];
}

/** Centres of the alignment patterns on one axis (Annex E): evenly spaced from 6 to side - 7. */
function alignmentCentres(version) {
  if (version === 1) return [];
  const n = Math.floor(version / 7) + 2;
  const last = 4 * version + 10;
  // Spacing: even, and the same between all but the first two; version 32 is the exception.
  const step = version === 32 ? 26 : Math.ceil((last - 6) / (n - 1) / 2) * 2;
  const centres = [6];
  for (let i = n - 2; i >= 0; i--) centres.push(last - i * step);
  return centres;
}

// --- Reed-Solomon over GF(256), polynomial x^8 + x^4 + x^3 + x^2 + 1 (7.5.2) ------------------

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
for (let i = 0, x = 1; i < 255; i++) {
  EXP[i] = x;
  LOG[x] = i;
  x <<= 1;
  if (x & 0x100) x ^= 0x11d;
}
for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255];

const multiply = (a, b) => (a === 0 || b === 0 ? 0 : EXP[LOG[a] + LOG[b]]);

/** The generator polynomial (x - α^0)(x - α^1)…(x - α^(degree-1)), highest power first. */
function generator(degree) {
  let poly = [1];
  for (let i = 0; i < degree; i++) {
    const next = new Array(poly.length + 1).fill(0);
    poly.forEach((c, j) => {
      next[j] ^= c;
      next[j + 1] ^= multiply(c, EXP[i]);
    });
    poly = next;
  }
  return poly;
}

/** The error correction codewords of a block: the remainder of data·x^n divided by the generator. */
function errorCorrection(data, gen) {
  const rest = new Array(gen.length - 1).fill(0);
  for (const byte of data) {
    const factor = byte ^ rest.shift();
    rest.push(0);
    for (let i = 0; i < rest.length; i++) rest[i] ^= multiply(gen[i + 1], factor);
  }
  return rest;
}

// --- Codewords ---------------------------------------------------------------------------------

/** The smallest version whose data codewords hold `length` bytes in one byte-mode segment. */
function versionFor(length) {
  for (let version = 1; version <= 40; version++) {
    const countBits = version < 10 ? 8 : 16; // Table 3
    if (4 + countBits + 8 * length <= 8 * dataCodewords(version)) return version;
  }
  throw new RangeError(`${length} bytes are too many for a QR code (at most 2331 at level M)`);
}

/** The data codewords (7.4): mode, count, the bytes, terminator, zeros to a byte, pad codewords. */
function dataBytes(bytes, version) {
  const capacity = dataCodewords(version);
  const bits = [];
  const put = (value, length) => {
    for (let i = length - 1; i >= 0; i--) bits.push((value >>> i) & 1);
  };
  put(BYTE_MODE, 4);
  put(bytes.length, version < 10 ? 8 : 16);
  for (const byte of bytes) put(byte, 8);
  put(0, Math.min(4, capacity * 8 - bits.length));
  put(0, (8 - (bits.length % 8)) % 8);
  const codewords = [];
  for (let i = 0; i < bits.length; i += 8) codewords.push(bits.slice(i, i + 8).reduce((byte, bit) => (byte << 1) | bit, 0));
  for (let i = 0; codewords.length < capacity; i++) codewords.push(PAD[i % 2]);
  return codewords;
}

/** The final sequence (7.6): the blocks' data codewords interleaved, then their error correction. */
function finalCodewords(data, version) {
  const blocks = EC_BLOCKS[version];
  const ecLength = EC_PER_BLOCK[version];
  const total = Math.floor(rawModules(version) / 8);
  const shortBlocks = blocks - (total % blocks); // the first ones are a codeword shorter than the rest
  const shortData = Math.floor(total / blocks) - ecLength;
  const gen = generator(ecLength);
  const dataBlocks = [];
  const ecBlocks = [];
  for (let b = 0, at = 0; b < blocks; b++) {
    const block = data.slice(at, at + shortData + (b < shortBlocks ? 0 : 1));
    at += block.length;
    dataBlocks.push(block);
    ecBlocks.push(errorCorrection(block, gen));
  }
  const out = [];
  for (let i = 0; i <= shortData; i++) {
    for (const block of dataBlocks) if (i < block.length) out.push(block[i]);
  }
  for (let i = 0; i < ecLength; i++) {
    for (const block of ecBlocks) out.push(block[i]);
  }
  return out;
}

// --- The symbol -----------------------------------------------------------------------------

/** A BCH code: `data` followed by its remainder modulo `poly` (of degree `degree`). */
function bch(data, poly, degree) {
  let rest = data;
  for (let i = 0; i < degree; i++) rest = (rest << 1) ^ ((rest >>> (degree - 1)) & 1) * poly;
  return (data << degree) | (rest & ((1 << degree) - 1));
}

class Symbol {
  constructor(version) {
    this.version = version;
    this.size = 17 + 4 * version;
    this.dark = Array.from({ length: this.size }, () => new Array(this.size).fill(false));
    this.fixed = Array.from({ length: this.size }, () => new Array(this.size).fill(false)); // function modules
    this.drawFunctionPatterns();
  }

  set(row, col, dark) {
    this.dark[row][col] = dark;
    this.fixed[row][col] = true;
  }

  drawFunctionPatterns() {
    const { size, version } = this;
    // Finder patterns with their light separators (6.3.3, 6.3.4).
    for (const [top, left] of [[0, 0], [0, size - 7], [size - 7, 0]]) {
      for (let r = -1; r <= 7; r++) {
        for (let c = -1; c <= 7; c++) {
          const row = top + r;
          const col = left + c;
          if (row < 0 || row >= size || col < 0 || col >= size) continue;
          const ring = Math.max(Math.abs(r - 3), Math.abs(c - 3)); // 0 to 4 from the centre
          this.set(row, col, ring !== 2 && ring !== 4);
        }
      }
    }
    // Timing patterns (6.3.5).
    for (let i = 8; i < size - 8; i++) {
      this.set(6, i, i % 2 === 0);
      this.set(i, 6, i % 2 === 0);
    }
    // Alignment patterns (6.3.6), except where they would overlap a finder.
    const centres = alignmentCentres(version);
    const onFinder = (row, col) => (row < 9 || row > size - 10) && (col < 9 || col > size - 10) && !(row > 9 && col > 9);
    for (const row of centres) {
      for (const col of centres) {
        if (onFinder(row, col)) continue;
        for (let r = -2; r <= 2; r++) {
          for (let c = -2; c <= 2; c++) this.set(row + r, col + c, Math.max(Math.abs(r), Math.abs(c)) !== 1);
        }
      }
    }
    // The format information's places, written for each mask (drawFormat); the dark module (7.9.1).
    this.drawFormat(0);
    // The version information (7.10), versions 7 and up: 18 bits, twice.
    if (version >= 7) {
      const bits = bch(version, 0x1f25, 12);
      for (let i = 0; i < 18; i++) {
        const dark = ((bits >>> i) & 1) === 1;
        const a = size - 11 + (i % 3);
        const b = Math.floor(i / 3);
        this.set(b, a, dark); // top right, 6 rows of 3
        this.set(a, b, dark); // bottom left, 3 rows of 6
      }
    }
  }

  /** The format information (7.9): level M and `mask`, 15 bits, twice; and the dark module. */
  drawFormat(mask) {
    const { size } = this;
    const bits = bch((LEVEL_M << 3) | mask, 0x537, 10) ^ 0x5412;
    const bit = (i) => ((bits >>> i) & 1) === 1;
    // Around the top left finder: up column 8 (skipping the timing row), then left along row 8.
    for (let i = 0; i <= 5; i++) this.set(i, 8, bit(i));
    this.set(7, 8, bit(6));
    this.set(8, 8, bit(7));
    this.set(8, 7, bit(8));
    for (let i = 9; i < 15; i++) this.set(8, 14 - i, bit(i));
    // The copy: along row 8 under the top right finder, then down column 8 beside the bottom left one.
    for (let i = 0; i < 8; i++) this.set(8, size - 1 - i, bit(i));
    for (let i = 8; i < 15; i++) this.set(size - 15 + i, 8, bit(i));
    this.set(size - 8, 8, true);
  }

  /** Places the codewords' bits (7.7.3): two-column strips from the right, up then down, skipping column 6. */
  place(codewords) {
    const { size } = this;
    const total = codewords.length * 8;
    let i = 0;
    for (let right = size - 1; right >= 1; right -= 2) {
      if (right === 6) right = 5; // the vertical timing pattern
      const upward = ((size - 1 - right) >> 1) % 2 === 0;
      for (let step = 0; step < size; step++) {
        const row = upward ? size - 1 - step : step;
        for (const col of [right, right - 1]) {
          if (this.fixed[row][col]) continue;
          // The remainder bits, past the last codeword, are light (before masking).
          this.dark[row][col] = i < total && ((codewords[i >>> 3] >>> (7 - (i & 7))) & 1) === 1;
          i++;
        }
      }
    }
  }

  /** The matrix with `mask` applied to the data modules and named in the format information. */
  masked(mask) {
    const test = MASKS[mask];
    this.drawFormat(mask);
    return this.dark.map((line, row) => line.map((dark, col) => (this.fixed[row][col] ? dark : dark !== test(row, col))));
  }
}

// The data mask patterns (Table 10): a module is flipped where the condition holds (i row, j column).
const MASKS = [
  (i, j) => (i + j) % 2 === 0,
  (i) => i % 2 === 0,
  (i, j) => j % 3 === 0,
  (i, j) => (i + j) % 3 === 0,
  (i, j) => (Math.floor(i / 2) + Math.floor(j / 3)) % 2 === 0,
  (i, j) => ((i * j) % 2) + ((i * j) % 3) === 0,
  (i, j) => (((i * j) % 2) + ((i * j) % 3)) % 2 === 0,
  (i, j) => (((i + j) % 2) + ((i * j) % 3)) % 2 === 0,
];

// --- Choosing the mask (7.8.3) ------------------------------------------------------------------

const FINDER_LIKE = [true, false, true, true, true, false, true]; // 1:1:3:1:1, dark:light:dark:light:dark

/** Penalty points of one row or column: N1 (runs of 5 or more) and N3 (finder-like patterns). */
function linePenalty(line) {
  let points = 0;
  for (let start = 0; start < line.length;) {
    let end = start;
    while (end < line.length && line[end] === line[start]) end++;
    if (end - start >= 5) points += 3 + (end - start - 5);
    start = end;
  }
  // A finder-like pattern with a light area 4 modules wide before or after it; outside the
  // symbol is the quiet zone, which is light.
  const light = (from, to) => {
    for (let k = from; k < to; k++) if (k >= 0 && k < line.length && line[k]) return false;
    return true;
  };
  for (let k = 0; k + 7 <= line.length; k++) {
    if (FINDER_LIKE.every((dark, m) => line[k + m] === dark) && (light(k - 4, k) || light(k + 7, k + 11))) points += 40;
  }
  return points;
}

/** The penalty score of a masked symbol: N1 + N2 + N3 + N4 over its rows and columns. */
export function penalty(modules) {
  const size = modules.length;
  let points = 0;
  let dark = 0;
  for (let i = 0; i < size; i++) {
    points += linePenalty(modules[i]);
    points += linePenalty(modules.map((line) => line[i]));
  }
  for (let row = 0; row < size; row++) {
    for (let col = 0; col < size; col++) {
      if (modules[row][col]) dark++;
      if (row + 1 < size && col + 1 < size) {
        const c = modules[row][col];
        if (modules[row][col + 1] === c && modules[row + 1][col] === c && modules[row + 1][col + 1] === c) points += 3; // N2
      }
    }
  }
  // N4: 10 for every full 5% the proportion of dark modules is away from 50%.
  points += 10 * Math.floor(Math.abs(dark * 20 - size * size * 10) / (size * size));
  return points;
}

// --- The interface ------------------------------------------------------------------------------

/**
 * Encodes `text` (as UTF-8): { version, mask, modules }, `modules` its rows of booleans (true:
 * dark), without the quiet zone. `mask` (0 to 7) forces a mask; by default the one of the lowest
 * penalty (the first of them on a tie). Throws a RangeError for a text too long for any version.
 */
export function qrCode(text, { mask } = {}) {
  const bytes = new TextEncoder().encode(String(text));
  const version = versionFor(bytes.length);
  const symbol = new Symbol(version);
  symbol.place(finalCodewords(dataBytes(bytes, version), version));
  if (mask !== undefined && mask !== null) {
    if (!Number.isInteger(mask) || mask < 0 || mask > 7) throw new RangeError(`no mask ${mask}: masks are 0 to 7`);
    return { version, mask, modules: symbol.masked(mask) };
  }
  let best = null;
  for (let m = 0; m < 8; m++) {
    const modules = symbol.masked(m);
    const points = penalty(modules);
    if (!best || points < best.points) best = { version, mask: m, modules, points };
  }
  return { version, mask: best.mask, modules: best.modules };
}

/** The module matrix of `text` (see qrCode). */
export function qrMatrix(text, options) {
  return qrCode(text, options).modules;
}

/**
 * SVG path data of the dark modules, a rectangle per horizontal run, shifted by the quiet
 * zone: "M{x} {y}h{run}v1h-{run}z" each.
 */
export function qrPath(modules, quiet = QUIET_ZONE) {
  const parts = [];
  modules.forEach((line, y) => {
    for (let x = 0; x < line.length;) {
      if (!line[x]) {
        x++;
        continue;
      }
      let end = x;
      while (end < line.length && line[end]) end++;
      parts.push(`M${x + quiet} ${y + quiet}h${end - x}v1h-${end - x}z`);
      x = end;
    }
  });
  return parts.join("");
}

/**
 * The matrix drawn as an <svg> (role img, named by `label`): dark modules on a light square
 * with the quiet zone around, black on white in either colour scheme (a scanner needs the
 * contrast, and some cannot read a code in inverted colours). `scale`: CSS pixels per module,
 * the width it asks for (CSS may make it smaller).
 */
export function qrSVG(modules, { label = "QR code for your authenticator app", scale = 4 } = {}) {
  const NS = "http://www.w3.org/2000/svg";
  const side = modules.length + 2 * QUIET_ZONE;
  const svg = document.createElementNS(NS, "svg");
  for (const [name, value] of Object.entries({
    viewBox: `0 0 ${side} ${side}`, width: side * scale, height: side * scale, role: "img", "aria-label": label, "shape-rendering": "crispEdges",
  })) svg.setAttribute(name, String(value));
  const background = document.createElementNS(NS, "rect");
  for (const [name, value] of Object.entries({ width: side, height: side, fill: "#fff" })) background.setAttribute(name, String(value));
  const path = document.createElementNS(NS, "path");
  path.setAttribute("d", qrPath(modules));
  path.setAttribute("fill", "#000");
  svg.append(background, path);
  return svg;
}

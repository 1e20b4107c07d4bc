// Unit tests of Web/qr.js (the QR Code encoder of the two-factor setup). Tests/peers/test_qr.py
// compares its symbols with the Python qrcode library's, module by module.
import { test } from "node:test";
import assert from "node:assert/strict";
import { QUIET_ZONE, penalty, qrCode, qrMatrix, qrPath } from "../../Web/qr.js";

/** The 15 format bits of one copy: around the top left finder, and along row 8 / down column 8. */
function formatCopies(m) {
  const size = m.length;
  const first = [0, 1, 2, 3, 4, 5, 7, 8].map((r) => m[r][8]).concat([7, 5, 4, 3, 2, 1, 0].map((c) => m[8][c]));
  const second = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => m[8][size - 1 - i]).concat([8, 9, 10, 11, 12, 13, 14].map((i) => m[size - 15 + i][8]));
  const value = (bits) => bits.reduce((sum, dark, i) => sum | (Number(dark) << i), 0);
  return [value(first), value(second)];
}

test("qr: the smallest version that holds the UTF-8 bytes, 17 + 4v modules a side", () => {
  assert.equal(qrCode("a").version, 1);
  assert.equal(qrMatrix("a").length, 21);
  assert.equal(qrCode("x".repeat(14)).version, 1); // version 1-M holds 14 bytes
  assert.equal(qrCode("x".repeat(15)).version, 2);
  assert.equal(qrCode("😀".repeat(4)).version, 2); // 16 bytes of UTF-8, 8 UTF-16 units
  assert.equal(qrCode("x".repeat(2331)).version, 40);
  assert.equal(qrMatrix("x".repeat(2331)).length, 177);
  assert.throws(() => qrCode("x".repeat(2332)), RangeError);
  const uri = "otpauth://totp/Noted:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Noted&algorithm=SHA1&digits=6&period=30";
  assert.equal(qrCode(uri).version, 7); // 109 bytes: over version 6-M's 106
});

test("qr: finder and timing patterns, and the format information twice, naming level M and the mask", () => {
  for (const mask of [0, 3, 7]) {
    const { modules: m, mask: used } = qrCode("otpauth://totp/Noted:bob?secret=ABC", { mask });
    assert.equal(used, mask);
    const size = m.length;
    const finder = (top, left) => [0, 1, 2, 3, 4, 5, 6].map((r) => [0, 1, 2, 3, 4, 5, 6].map((c) => m[top + r][left + c]));
    const expected = finder(0, 0);
    assert.deepEqual(expected[3], [true, false, true, true, true, false, true]);
    assert.deepEqual(finder(0, size - 7), expected);
    assert.deepEqual(finder(size - 7, 0), expected);
    for (let i = 8; i < size - 8; i++) {
      assert.equal(m[6][i], i % 2 === 0);
      assert.equal(m[i][6], i % 2 === 0);
    }
    assert.equal(m[size - 8][8], true, "the dark module");
    const [first, second] = formatCopies(m);
    assert.equal(first, second);
    const format = first ^ 0x5412;
    assert.equal(format >> 13, 0b00, "level M");
    assert.equal((format >> 10) & 7, mask);
    // A BCH(15,5) codeword: no remainder modulo the generator 0x537.
    let rest = format;
    for (let bit = 14; bit >= 10; bit--) if (rest & (1 << bit)) rest ^= 0x537 << (bit - 10);
    assert.equal(rest, 0);
  }
  assert.throws(() => qrCode("a", { mask: 8 }), RangeError);
});

test("qr: the automatic mask is the first of the lowest penalty", () => {
  for (const text of ["a", "hello world", "otpauth://totp/Noted:carol?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Noted", "é".repeat(90)]) {
    const scores = [0, 1, 2, 3, 4, 5, 6, 7].map((mask) => penalty(qrMatrix(text, { mask })));
    const { mask, modules } = qrCode(text);
    assert.equal(mask, scores.indexOf(Math.min(...scores)), text);
    assert.deepEqual(modules, qrMatrix(text, { mask }));
  }
});

test("qr: the SVG path draws exactly the dark modules, inside the quiet zone", () => {
  const modules = qrMatrix("https://example.org/a?b=c");
  const drawn = modules.map((line) => line.map(() => false));
  for (const [, x, y, run] of qrPath(modules).matchAll(/M(\d+) (\d+)h(\d+)v1h-\3z/g)) {
    for (let k = 0; k < Number(run); k++) drawn[Number(y) - QUIET_ZONE][Number(x) - QUIET_ZONE + k] = true;
  }
  assert.deepEqual(drawn, modules);
  assert.equal(qrPath([[false, true, true], [true, false, true], [false, false, false]], 0), "M1 0h2v1h-2zM0 1h1v1h-1zM2 1h1v1h-1z");
});

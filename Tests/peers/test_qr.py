"""Web/qr.js (the web app's QR Code encoder, for the two-factor setup) against an independent
one, the Python `qrcode` library: for many texts (every length from 1 to 300 of ASCII, UTF-8
with emoji and other scripts, real otpauth:// URIs, the largest text of every version and one
byte more) the same version, and with the same mask the same matrix, module by module.

The automatic mask choices are compared too, and may differ for a reason: `qrcode` scores each
mask on a symbol whose format information, version information and dark module are all left
light, and counts a finder-like pattern (N3) only with its four light modules inside the
symbol (checked here: its score of such symbols gives its choice every time); qr.js scores
the symbol as it will be (ISO/IEC 18004 7.8.3), where the quiet zone around it is light. Both
are readable codes. So qr.js's choice is checked against a score written here from the
standard, and the agreement with `qrcode` is reported (a warning) rather than required.

Needs node (skipped with a printed notice without it) and `qrcode` (scripts/test installs it)."""
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import warnings

import pytest

qrcode = pytest.importorskip("qrcode")
from qrcode import util  # noqa: E402

from qr_reference import format_mask, reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QR_JS = os.path.join(ROOT, "Web", "qr.js")
NODE = shutil.which("node")
if not NODE:
    print("test_qr: NOTICE: node not found: the QR encoder is not tested")
    pytest.skip("node not installed", allow_module_level=True)

# Runs qr.js over the cases read as JSON from standard input: version, mask and rows ("0101…") each.
RUNNER = """
const { qrCode } = await import(process.env.QR_JS_URL);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = JSON.parse(input).map(({ text, mask }) => {
  const { version, mask: used, modules } = qrCode(text, mask === null ? {} : { mask });
  return { version, mask: used, rows: modules.map((line) => line.map((dark) => (dark ? "1" : "0")).join("")) };
});
process.stdout.write(JSON.stringify(out));
"""

# The most bytes each version holds at level M in byte mode (ISO/IEC 18004 Table 7).
CAPACITY_M = [14, 26, 42, 62, 84, 106, 122, 152, 180, 213, 251, 287, 331, 362, 412, 450, 504, 560, 624, 666,
              711, 779, 857, 911, 997, 1059, 1125, 1190, 1264, 1370, 1452, 1538, 1628, 1722, 1809, 1911, 1989, 2099, 2213, 2331]


def qr_js(cases):
    """qr.js's symbols for [(text, mask or None)]."""
    answer = subprocess.run([NODE, "--input-type=module", "-e", RUNNER], input=json.dumps([{"text": t, "mask": m} for t, m in cases]),
                            env={**os.environ, "QR_JS_URL": "file://" + QR_JS}, capture_output=True, text=True, timeout=300)
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


def differences(a, b):
    return [(r, c) for r, (x, y) in enumerate(zip(a, b)) for c, (p, q) in enumerate(zip(x, y)) if p != q]


def texts():
    """The texts compared: every ASCII length 1 to 300, UTF-8 of other scripts, otpauth URIs."""
    rng = random.Random(18004)
    printable = [chr(c) for c in range(32, 127)]
    out = ["".join(rng.choice(printable) for _ in range(n)) for n in range(1, 301)]
    out += ["0", "12345678", "HELLO WORLD", "hello, world", "\n", "\x00\x01\x7f"]
    pieces = ["é", "ß", "Привет", "日本語", "Καλημέρα", "עברית", "😀", "👋🏽", "🛒", "👨‍👩‍👧", "€", "a", " "]
    out += ["".join(rng.choice(pieces) for _ in range(n)) for n in (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 120)]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    for user in ("alice", "bob.smith", "m%C3%BCller", "a" * 64, "web1a2b3c"):
        secret = "".join(rng.choice(alphabet) for _ in range(32))
        out.append(f"otpauth://totp/Noted:{user}?secret={secret}&issuer=Noted&algorithm=SHA1&digits=6&period=30")
    return out


def test_same_version_and_same_matrix_for_each_mask():
    cases = [(text, i % 8) for i, text in enumerate(texts())]
    # Every version: the largest text it holds, and one byte more (the next version).
    for version, capacity in enumerate(CAPACITY_M, start=1):
        cases.append(("v" * capacity, version % 8))
        if version < 40:
            cases.append(("w" * (capacity + 1), (version + 3) % 8))
    # One text under all eight masks.
    cases += [("otpauth://totp/Noted:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Noted", m) for m in range(8)]
    results = qr_js(cases)
    failures = []
    for (text, mask), got in zip(cases, results):
        version, rows = reference(text, mask=mask)
        if got["version"] != version or got["mask"] != mask:
            failures.append(f"{text[:40]!r} ({len(text.encode())} bytes): version {got['version']} mask {got['mask']}, qrcode version {version}")
            continue
        wrong = differences(got["rows"], rows)
        if wrong or len(got["rows"]) != len(rows):
            failures.append(f"{text[:40]!r} (version {version}, mask {mask}): {len(wrong)} modules differ, first {wrong[:5]}")
        elif format_mask(got["rows"]) != mask:
            failures.append(f"{text[:40]!r}: the format information names mask {format_mask(got['rows'])}")
    sizes = {len(text.encode()) for text, _ in cases}
    assert {got["version"] for got in results} == set(range(1, 41))
    assert not failures, f"{len(failures)} of {len(cases)} symbols differ:\n" + "\n".join(failures[:20])
    assert len(sizes) > 300


def test_too_long_for_any_version_is_refused():
    answer = subprocess.run([NODE, "--input-type=module", "-e", "const { qrCode } = await import(process.env.QR_JS_URL); qrCode('x'.repeat(2332));"],
                            env={**os.environ, "QR_JS_URL": "file://" + QR_JS}, capture_output=True, text=True, timeout=60)
    assert answer.returncode != 0 and "RangeError" in answer.stderr and "too many" in answer.stderr, answer.stderr


# --- The automatic mask ---------------------------------------------------------------------

def standard_penalty(rows):
    """The penalty score of ISO/IEC 18004 7.8.3.1, written here apart from qr.js: N1 = 3 + (run
    - 5) per run of 5 or more of one colour in a row or column; N2 = 3 per 2x2 block of one
    colour; N3 = 40 per 1:1:3:1:1 pattern with 4 light modules before or after it (outside the
    symbol is the light quiet zone); N4 = 10 per full 5% of dark modules away from 50%."""
    lines = rows + ["".join(col) for col in zip(*rows)]
    n1 = sum(3 + len(run) - 5 for line in lines for run in (list(g) for _, g in itertools.groupby(line)) if len(run) >= 5)
    n2 = 3 * sum(1 for a, b in zip(rows, rows[1:]) for i in range(len(a) - 1) if len({a[i], a[i + 1], b[i], b[i + 1]}) == 1)
    n3 = 0
    for line in lines:
        padded = "0000" + line + "0000"
        for m in re.finditer(r"(?=1011101)", padded):
            k = m.start()
            if padded[max(0, k - 4):k] == "0000" or padded[k + 7:k + 11] == "0000":
                n3 += 40
    dark = sum(line.count("1") for line in rows)
    total = len(rows) ** 2
    n4 = 10 * int(abs(dark * 100 / total - 50) // 5)
    return n1 + n2 + n3 + n4


def without_information(rows, version):
    """The symbol with its format information, dark module and version information light, as
    `qrcode` scores the masks."""
    size = len(rows)
    places = [(i, 8) for i in range(9) if i != 6] + [(8, i) for i in range(8) if i != 6]
    places += [(8, size - 1 - i) for i in range(8)] + [(size - 8 + i, 8) for i in range(8)]
    if version >= 7:
        places += [(r, size - 11 + c) for r in range(6) for c in range(3)] + [(size - 11 + c, r) for r in range(6) for c in range(3)]
    grid = [list(line) for line in rows]
    for r, c in places:
        grid[r][c] = "0"
    return ["".join(line) for line in grid]


def test_automatic_mask_is_the_lowest_standard_penalty_and_agreement_with_qrcode_is_reported():
    rng = random.Random(7)
    sample = [t for t in texts() if len(t) % 9 == 0 or not t.isascii() or t.startswith("otpauth:")]
    sample += ["x" * rng.randint(300, 900) for _ in range(3)]
    results = qr_js([(text, None) for text in sample])
    disagreements = []
    for text, got in zip(sample, results):
        version = got["version"]
        symbols = [reference(text, version=version, mask=m)[1] for m in range(8)]
        scores = [standard_penalty(rows) for rows in symbols]
        best = scores.index(min(scores))  # the first of the lowest
        assert got["mask"] == best, f"{text[:40]!r}: qr.js chose mask {got['mask']} ({scores[got['mask']]} points), the lowest is {best}: {scores}"
        assert got["rows"] == symbols[best]
        chosen = format_mask(reference(text)[1])
        # qrcode's own choice, as this docstring explains it: its score of the symbols with the
        # format and version information and the dark module left light.
        blanked = [util.lost_point([[dark == "1" for dark in line] for line in without_information(rows, version)]) for rows in symbols]
        assert chosen == blanked.index(min(blanked)), f"{text[:40]!r}: qrcode's choice is not explained"
        if chosen != got["mask"]:
            disagreements.append(f"{text[:30]!r} (version {version}): qr.js mask {got['mask']}, qrcode mask {chosen}")
    if disagreements:
        warnings.warn(f"automatic mask: qr.js and qrcode chose differently for {len(disagreements)} of {len(sample)} texts "
                      "(qrcode scores each mask with the format and version information and the dark module left light, "
                      "and counts N3 within the symbol only): "
                      + "; ".join(disagreements[:5]))

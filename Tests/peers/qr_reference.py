"""The Python `qrcode` library as the reference for Web/qr.js (Tests/peers/test_qr.py) and for
the QR code the web app shows (test_webapp_moving_in.py): its symbol of a text, and the mask a
symbol names in its format information."""
import qrcode
from qrcode import util
from qrcode.constants import ERROR_CORRECT_M


def reference(text, version=None, mask=None):
    """`qrcode`'s symbol of the text's UTF-8 in one byte-mode segment at level M: (version, rows
    of "0"/"1"), the smallest version and the mask qrcode prefers unless given."""
    qr = qrcode.QRCode(version=version, error_correction=ERROR_CORRECT_M, border=0, mask_pattern=mask)
    qr.add_data(util.QRData(text.encode("utf-8"), mode=util.MODE_8BIT_BYTE, check_data=False))
    qr.make(fit=version is None)
    return qr.version, ["".join("1" if dark else "0" for dark in line) for line in qr.modules]


def format_mask(rows):
    """The mask a symbol names in its format information (the copy along row 8, top right, then
    down column 8, bottom left): bits 0 to 14 there, less the XOR mask, its three mask bits."""
    size = len(rows)
    bits = [rows[8][size - 1 - i] for i in range(8)] + [rows[size - 15 + i][8] for i in range(8, 15)]
    value = sum(int(b) << i for i, b in enumerate(bits)) ^ 0x5412
    assert value >> 13 == 0b00, "level M"
    return (value >> 10) & 0b111

#!/usr/bin/env python3
"""Writes Tests/NotedPortingTests/Fixtures: sample exports of other notes apps, shaped the
way those apps' own exporters write them (FORMATS.md says which source each shape comes
from), the damaged files an importer must refuse or half-read, and EXPECTED.json, the notes
a correct importer makes of each.

Deterministic: every id, date, zip/tar timestamp and "random" word is fixed, so running it
again rewrites the same bytes. Python 3.9+, standard library only.

    python3 scripts/make-import-fixtures.py
"""

import base64
import hashlib
import io
import json
import os
import random
import re
import shutil
import struct
import tarfile
import zipfile
import zlib
from datetime import datetime, timedelta, timezone
from xml.etree import ElementTree as ET

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "NotedPortingTests", "Fixtures")
ROOT = os.path.normpath(ROOT)

EXPECTED = {}  # fixture path -> list of expected notes
MALFORMED = {}  # fixture path -> expectation

UTC = timezone.utc


# ----------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------

def dt(s):
    """'2024-01-05T10:11:12.345Z' -> aware datetime."""
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


def iso_ms(d):
    d = d.astimezone(UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (d.microsecond // 1000)


def ms(d):
    return int(round(d.timestamp() * 1000))


def us(d):
    return int(d.timestamp()) * 1_000_000 + d.microsecond


def write(path, data):
    full = os.path.join(ROOT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(full, "wb") as f:
        f.write(data)
    return data


def note(source, source_id, title, body, tags=(), folder=None, pinned=False, trashed=False, created=None, updated=None):
    return {
        "source": source,
        "sourceID": source_id,
        "title": title,
        "body": body,
        "tags": list(tags),
        "folder": folder,
        "pinned": pinned,
        "trashed": trashed,
        "created": created,
        "updated": updated,
    }


class Unseekable(io.RawIOBase):
    """A write-only stream without seek/tell, so zipfile writes data descriptors (flag bit 3)
    and sizes after each entry, as browsers' and Google's streaming zip writers do."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)

    def seekable(self):
        return False

    def tell(self):
        raise io.UnsupportedOperation

    def flush(self):
        pass


def make_zip(entries, streaming=False):
    """entries: list of (name, bytes|None for a directory, (y, m, d, H, M, S), create_system)."""
    out = Unseekable() if streaming else io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, when, system in entries:
            info = zipfile.ZipInfo(name, date_time=when)
            info.create_system = system
            if data is None:
                info.external_attr = 0x10 if system == 0 else (0o40755 << 16) | 0x10
                info.compress_type = zipfile.ZIP_STORED
                z.writestr(info, b"")
            else:
                # (DOS archive bit: zipfile refuses a zero attribute; JSZip writes 0, Windows 0x20)
                info.external_attr = 0x20 if system == 0 else (0o100644 << 16)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
    return bytes(out.buf) if streaming else out.getvalue()


def png(width, height, seed):
    """A small valid RGB PNG (a colour gradient)."""
    rnd = random.Random(seed)
    r0, g0, b0 = rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for x in range(width):
            raw += bytes(((r0 + 8 * x) % 256, (g0 + 8 * y) % 256, (b0 + 4 * (x + y)) % 256))

    def chunk(kind, payload):
        c = struct.pack(">I", len(payload)) + kind + payload
        return c + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


# Sentences for the long notes: several scripts, emoji, combining marks, punctuation, but no
# Markdown or XML specials (no * _ # [ ] < > &), so every format carries them as they are.
SENTENCES = [
    "The morning train was late again, so I read two chapters on the platform.",
    "We walked along the river until the fog lifted and the bridges appeared one by one.",
    "Der Zug nach München fährt um halb neun, aber heute war er überfüllt.",
    "Grüße aus Köln: das Wetter ist grau, der Kaffee ist gut, die Stimmung auch.",
    "Ce matin, le marché était plein de fraises, de cerises et de bruit joyeux.",
    "On a parlé du projet pendant une heure, puis on a décidé d'attendre lundi.",
    "Hoy aprendí tres palabras nuevas y olvidé dónde dejé las llaves.",
    "Сегодня было холодно, но солнце светило весь день, и снег искрился.",
    "Мы договорились встретиться в пятницу у старого фонтана в центре города.",
    "今日は雨が降っていたので、家で本を読んでお茶を飲みました。",
    "駅前の新しいパン屋さんのメロンパンがとても美味しかった。",
    "我们明天早上八点在图书馆门口见面，然后一起去吃早饭。",
    "오늘은 친구와 함께 한강 공원에서 자전거를 탔어요.",
    "Καλημέρα σε όλους, η θάλασσα σήμερα είναι ήρεμη και γαλάζια.",
    "Bugün hava çok güzeldi, sahilde uzun bir yürüyüş yaptık.",
    "Dziś ugotowałam zupę pomidorową według przepisu babci.",
    "Kävimme saunassa ja uimme järvessä, vaikka vesi oli kylmää.",
    "A reunião foi adiada para quinta-feira às três da tarde.",
    "Vandaag hebben we de tuin opgeruimd en tulpen geplant.",
    "Idag regnade det hela dagen, så vi spelade kort och drack te.",
    "Note to self: buy batteries, return the library books, call the plumber.",
    "The recipe needs 200 g flour, 3 eggs, a pinch of salt and 250 ml milk.",
    "Coffee count today: ☕☕☕ — probably one too many.",
    "Weekend plan: hike 🥾, picnic 🧺, early night 😴.",
    "Saw a heron by the canal 🐦 and a very confused duck 🦆.",
    "Budget check: rent paid, savings up 2 %, groceries slightly over.",
    "Idea: a small app that reminds me to water the plants 🌱 on Sundays.",
    "The meeting ended early, which felt like a small holiday 🎉.",
    "Zoë and Noël finally visited; we made crêpes and talked until midnight.",
    "Reminder: the café on Rue Saint-Honoré closes at 18:00 on Sundays.",
    "Family 👨‍👩‍👧‍👦 dinner at grandma's, with the flag 🇯🇵 cake she insists on.",
    "Temperature dropped to −5 °C overnight; the pipes survived, barely.",
    "Pages read this week: 312. Pages I remember: maybe 40.",
    "Listened to an old record and found a ticket stub from 1998 inside the sleeve.",
    "Wrote three pages, deleted two, kept the one that sounded honest.",
    "The cat knocked the plant over again and looked extremely proud of it 🐈.",
    "Ночью шёл дождь, а утром всё пахло мокрой землёй и сиренью.",
    "Ήπιαμε καφέ στην πλατεία και κοιτάζαμε τα καράβια να φεύγουν.",
    "週末は京都へ行って、古いお寺をいくつか見て回った。",
    "Fixed the bike's brakes myself, which took three videos and two hours.",
]


def long_paragraphs(seed, target_bytes):
    rnd = random.Random(seed)
    paras = []
    size = 0
    n = 0
    while size < target_bytes:
        n += 1
        k = rnd.randint(3, 6)
        para = "Day %d. " % n + " ".join(rnd.choice(SENTENCES) for _ in range(k))
        paras.append(para)
        size += len(para.encode("utf-8")) + 2
    return paras


def utf16_slice(s, n):
    """JavaScript's String.prototype.slice(0, n): counts UTF-16 code units."""
    out = []
    units = 0
    for ch in s:
        u = 2 if ord(ch) > 0xFFFF else 1
        if units + u > n:
            # JS would cut a surrogate pair in half; we never let fixtures reach that case
            break
        out.append(ch)
        units += u
    return "".join(out)


# ----------------------------------------------------------------------------------------
# Simplenote (simplenote-electron lib/utils/export: export-notes.ts, to-zip.ts)
# ----------------------------------------------------------------------------------------

def sanitize_filename(s):
    """npm sanitize-filename with its default '' replacement."""
    s = re.sub(r'[/?<>\\:*|"]', "", s)
    s = re.sub(r"[\x00-\x1f\x80-\x9f]", "", s)
    s = re.sub(r"^\.+$", "", s)
    s = re.sub(r"^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?$", "", s, flags=re.I)
    s = re.sub(r"[. ]+$", "", s)
    return s


def simplenote_title_body(content):
    """Noted's reading: CRLF -> LF; title = first non-blank line, trimmed; body = the lines
    after it, leading blank lines dropped, the rest exactly as written."""
    text = content.replace("\r\n", "\n")
    lines = text.split("\n")
    i = 0
    while i < len(lines) and lines[i].strip() == "":
        i += 1
    if i == len(lines):
        return "", ""
    title = lines[i].strip()
    rest = lines[i + 1:]
    while rest and rest[0].strip() == "":
        rest = rest[1:]
    return title, "\n".join(rest)


def simplenote():
    crlf = lambda s: s.replace("\r\n", "\n").replace("\n", "\r\n")
    long_text = "Reading log 2023 📚\n\n" + "\n\n".join(long_paragraphs(101, 25_000)) + "\n"
    active = [
        dict(id="5b2f0c9e-8d1a-4c3b-9e7f-6a5d4c3b2a19",
             content="Groceries 🛒\n\n- [ ] Oat milk\n- [x] Eggs\n- [ ] Äpfel & Birnen\n- [x] 抹茶 (matcha)\n- [ ] Bread 🥖\n",
             created="2024-01-05T10:11:12.345Z", modified="2024-02-27T18:03:41.902Z",
             pinned=True, markdown=True, tags=["home", "shopping"]),
        dict(id="c41e7a2b-0f6d-4e88-b1a3-95d2e6f70c84",
             content="Привет, мир — заметка\n\nЭто заметка на русском языке.\n日本語のテキストも入っています。\nΚαλημέρα! 👋🏽 Ünïcödé & “quotes”\n\nالنص العربي يُكتب من اليمين إلى اليسار.\n",
             created="2023-11-02T07:45:00.000Z", modified="2024-01-18T21:30:15.120Z",
             tags=["languages", "日本"]),
        dict(id="agtzaW1wbGUtbm90ZXIRCxIETm90ZRiAgICg7pKDCgw",
             content=long_text,
             created="2023-01-01T00:00:01.000Z", modified="2023-12-31T23:59:58.999Z",
             markdown=True, tags=["journal", "reading"]),
        dict(id="0e9a7c55-3b2d-4f1e-8c6a-d7b9e2f41a03",
             content="",
             created="2024-02-29T12:00:00.000Z", modified="2024-02-29T12:00:00.000Z"),
        dict(id="7f3d2e1c-9b8a-4765-a4c3-b2a1f0e9d8c7",
             content="\n  Meeting notes — Q1 kickoff  \nAgenda:\n1. Budget\n2. Hiring\n\nDecisions: ship the beta in **March**.",
             created="2024-01-08T09:00:00.000Z", modified="2024-01-08T10:30:45.500Z",
             tags=["work"], publicURL="http://simp.ly/p/x7Kq2B",
             collaboratorEmails=["ana@example.com", "ben@example.org"]),
        dict(id="e2d4c6b8-a0f1-4e3d-9c5b-7a8f6e4d2c1b",
             content="Ideas: v2 / draft?\n\n* a \"focus\" mode\n* export to <PDF>\n* keyboard shortcuts: ⌘K, ⌘⇧P",
             created="2023-06-12T16:20:30.250Z", modified="2023-06-15T08:05:00.000Z",
             markdown=True,
             tags=["ideas", "a-rather-long-tag-name-that-keeps-going", "another-quite-long-tag-name", "x"]),
    ]
    trashed = [
        dict(id="9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
             content="Groceries 🛒\n\n- [x] Coffee beans\n- [x] Rice",
             created="2023-10-01T08:00:00.000Z", modified="2023-10-03T19:45:10.010Z",
             tags=["shopping"]),
        dict(id="1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
             content="Old wifi password hint\nIt's on the router label 🙂",
             created="2022-05-17T13:14:15.161Z", modified="2023-09-09T09:09:09.090Z"),
    ]

    def export_note(n):
        o = {"id": n["id"], "content": crlf(n["content"]),
             "creationDate": n["created"], "lastModified": n["modified"]}
        if n.get("pinned"):
            o["pinned"] = True
        if n.get("markdown"):
            o["markdown"] = True
        if n.get("tags"):
            o["tags"] = sorted(n["tags"], key=lambda t: t.lower())
        if n.get("publicURL"):
            o["publicURL"] = n["publicURL"]
        if n.get("collaboratorEmails"):
            o["collaboratorEmails"] = n["collaboratorEmails"]
        return o

    doc = {"activeNotes": [export_note(n) for n in active], "trashedNotes": [export_note(n) for n in trashed]}
    notes_json = crlf(json.dumps(doc, ensure_ascii=False, indent=2)).encode("utf-8")

    def txt_files(notes, prefix):
        counts = {}
        out = []
        for n in notes:
            content = crlf(n["content"])
            tags = n.get("tags") and sorted(n["tags"], key=lambda t: t.lower())
            if tags:  # appendTags: tags joined ", " in lines of at most 75 characters, LF
                lines, last = [], ""
                for tag in tags:
                    if len(last) + len(tag) > 75:
                        lines.append(last)
                        last = tag
                    else:
                        last = last + ", " + tag
                lines.append(last)
                lines = [re.sub(r"^, ", "", l) for l in lines]
                content = content + "\n\nTags:\n  " + "\n  ".join(lines)
            first = [sanitize_filename(l.strip()) for l in content.split("\n")]
            first = [l for l in first if l] + ["untitled"]
            name = utf16_slice(first[0], 40)
            c = counts.get(name, 0)
            counts[name] = c + 1
            if c:
                name = "%s (%d)" % (name, c)
            when = dt(n["modified"]).timetuple()[:6]
            out.append((prefix + name + ".txt", content.encode("utf-8"), when))
        return out

    exported_at = (2024, 3, 2, 14, 5, 9)
    entries = [("source/", None, exported_at, 0), ("source/notes.json", notes_json, exported_at, 0)]
    entries += [(p, d, w, 0) for p, d, w in txt_files(active, "")]
    trash = txt_files(trashed, "trash/")
    entries.append(("trash/", None, exported_at, 0))
    entries += [(p, d, w, 0) for p, d, w in trash]
    write("simplenote/notes.zip", make_zip(entries))
    for name, data, _, _ in entries:
        if data is not None:
            write("simplenote/export/" + name, data)

    expected = []
    for n, is_trashed in [(n, False) for n in active] + [(n, True) for n in trashed]:
        title, body = simplenote_title_body(crlf(n["content"]))
        expected.append(note("simplenote", n["id"], title, body, export_note(n).get("tags", []), None,
                             bool(n.get("pinned")), is_trashed, n["created"], n["modified"]))
    EXPECTED["simplenote/export"] = expected
    EXPECTED["simplenote/notes.zip"] = "simplenote/export"

    # --- damaged or wrong files a person might pick
    write("simplenote/malformed-truncated-notes.json", notes_json[: len(notes_json) * 3 // 5])
    MALFORMED["simplenote/malformed-truncated-notes.json"] = {
        "expect": "error", "why": "source/notes.json cut off mid-string (an interrupted copy): not valid JSON"}
    zip_bytes = open(os.path.join(ROOT, "simplenote/notes.zip"), "rb").read()
    write("simplenote/malformed-truncated.zip", zip_bytes[: len(zip_bytes) // 2])
    MALFORMED["simplenote/malformed-truncated.zip"] = {
        "expect": "error", "why": "notes.zip cut in half (an interrupted download): no end-of-central-directory record"}
    wrong = [export_note(active[0]), export_note(active[1])]
    write("simplenote/malformed-wrong-top-level.json",
          crlf(json.dumps(wrong, ensure_ascii=False, indent=2)))
    MALFORMED["simplenote/malformed-wrong-top-level.json"] = {
        "expect": "error", "why": "top level is an array of notes, not {\"activeNotes\": [...], \"trashedNotes\": [...]}"}
    partial = {"activeNotes": [
        {"id": "3f2e1d0c-b9a8-4776-8554-433221100fed", "content": "Survivor\r\nThis note is fine.",
         "creationDate": "2024-03-01T08:00:00.000Z", "lastModified": "2024-03-01T08:05:00.000Z", "tags": ["ok"]},
        {"id": "4a3b2c1d-0e9f-4a8b-9c7d-6e5f4a3b2c1d",
         "creationDate": "2024-03-01T09:00:00.000Z", "lastModified": "2024-03-01T09:00:00.000Z"},
        {"id": "5b4c3d2e-1f0a-4b9c-8d7e-6f5a4b3c2d1e", "content": "Odd dates\r\nCreated on a day that does not exist.",
         "creationDate": "2024-02-30T25:61:00.000Z", "lastModified": "yesterday"},
        {"content": "No id\r\nA note without an id still has its words.",
         "creationDate": "2024-03-02T10:00:00.000Z", "lastModified": "2024-03-02T10:00:00.000Z",
         "tags": "not-a-list"},
    ]}
    write("simplenote/malformed-missing-fields.json", crlf(json.dumps(partial, ensure_ascii=False, indent=2)))
    MALFORMED["simplenote/malformed-missing-fields.json"] = {
        "expect": "partial",
        "why": "no trashedNotes key (read as empty); one note has no content (skipped with a warning); one has "
               "impossible dates (imported, dates not asserted: the importer picks its fallback); one has no id "
               "(imported, sourceID null) and a tags value that is a string, not a list (tags ignored)",
        "skipped": 1,
        "notes": [
            note("simplenote", "3f2e1d0c-b9a8-4776-8554-433221100fed", "Survivor", "This note is fine.", ["ok"], None,
                 False, False, "2024-03-01T08:00:00.000Z", "2024-03-01T08:05:00.000Z"),
            note("simplenote", "5b4c3d2e-1f0a-4b9c-8d7e-6f5a4b3c2d1e", "Odd dates", "Created on a day that does not exist.",
                 [], None, False, False, None, None),
            note("simplenote", None, "No id", "A note without an id still has its words.", [], None, False, False,
                 "2024-03-02T10:00:00.000Z", "2024-03-02T10:00:00.000Z"),
        ]}


# ----------------------------------------------------------------------------------------
# Evernote ENEX (evernote-export3.dtd / evernote-export4.dtd; ENML: enml2.dtd)
# ----------------------------------------------------------------------------------------

TODO_ON, TODO_OFF = "\x00TODO1\x00", "\x00TODO0\x00"
INLINE = {"b", "strong", "i", "em", "u", "s", "strike", "span", "font", "a", "br", "en-todo", "en-media",
          "sup", "sub", "code", "abbr", "cite", "small", "big", "q", "tt", "del", "ins", "img"}


def enml_to_markdown(enml, files_by_hash):
    """The reference reading of ENML that EXPECTED.json's Evernote bodies follow (FORMATS.md,
    "ENML to Markdown"). Lines, not paragraphs: every block (div, p, heading, list item, table
    row) is one line, as Evernote shows it; <div><br/></div> is an empty line."""
    start = enml.index("<en-note")
    root = ET.fromstring(enml[start:])

    def inline(el):
        inner = (el.text or "") + "".join(inline(c) + (c.tail or "") for c in el)
        tag = el.tag
        if tag == "br":
            return "\n"
        if tag == "en-todo":
            return TODO_ON if el.get("checked") == "true" else TODO_OFF
        if tag == "en-media":
            return "[attachment skipped: %s]" % files_by_hash[el.get("hash")]
        if tag in ("b", "strong") and inner.strip():
            return "**" + inner + "**"
        if tag in ("i", "em") and inner.strip():
            return "*" + inner + "*"
        if tag == "a":
            return "[%s](%s)" % (inner, el.get("href"))
        return inner

    def collapse(s):
        return re.sub(r"[ \t\r\n]+", " ", s).strip()

    def todo_line(line):
        if line.startswith(TODO_ON):
            return "- [x] " + line[len(TODO_ON):].lstrip()
        if line.startswith(TODO_OFF):
            return "- [ ] " + line[len(TODO_OFF):].lstrip()
        return line

    def container(el, depth):
        lines, cur = [], []

        def flush():
            s = "".join(cur)
            cur.clear()
            if s.strip(" \t\r") == "" and "\n" not in s:
                return
            segs = s.split("\n")
            if len(segs) > 1 and collapse(segs[-1]) == "":
                segs = segs[:-1]
            for seg in segs:
                lines.append(todo_line(collapse(seg)))

        if el.text:
            cur.append(el.text.replace("\n", " "))
        for c in el:
            if c.tag in INLINE:
                cur.append(inline(c))
            else:
                flush()
                lines.extend(block(c, depth))
            if c.tail:
                cur.append(c.tail.replace("\n", " "))
        flush()
        return lines

    def block(el, depth):
        tag = el.tag
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            return ["#" * int(tag[1]) + " " + collapse(" ".join(container(el, depth)))]
        if tag == "hr":
            return ["---"]
        if tag in ("ul", "ol"):
            return list_lines(el, depth)
        if tag == "table":
            rows = []
            for tr in el.iter("tr"):
                cells = [collapse(" ".join(container(td, depth))) for td in tr if td.tag in ("td", "th")]
                rows.append(" | ".join(cells))
            return rows
        if tag in ("colgroup", "col"):
            return []
        lines = container(el, depth)
        return lines if lines else [""]

    def list_lines(lst, depth):
        ordered = lst.tag == "ol"
        todo_list = "--en-todo:true" in (lst.get("style") or "").replace(" ", "")
        out, n = [], 0
        for li in lst:
            if li.tag in ("ul", "ol"):
                out.extend(list_lines(li, depth + 1))
                continue
            n += 1
            item = container(li, depth + 1)
            first = item[0] if item else ""
            rest = item[1:]
            checked = "--en-checked:true" in (li.get("style") or "").replace(" ", "")
            if todo_list:
                marker = "- [x] " if checked else "- [ ] "
            elif first.startswith("- [x] ") or first.startswith("- [ ] "):
                marker, first = first[:6], first[6:]
            else:
                marker = "%d. " % n if ordered else "- "
            out.append("  " * depth + marker + first)
            out.extend(rest)
        return out

    lines = container(root, 0)
    while lines and lines[0] == "":
        lines.pop(0)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def enex_date(iso):
    return dt(iso).strftime("%Y%m%dT%H%M%SZ")


def wrap(s, width):
    return "\n".join(s[i:i + width] for i in range(0, len(s), width))


def enml_doc(inner, modern=True):
    if modern:
        return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
                '<!DOCTYPE en-note SYSTEM "http://xml.evernote.com/pub/enml2.dtd"><en-note>' + inner + "</en-note>")
    return ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
            '<!DOCTYPE en-note SYSTEM "http://xml.evernote.com/pub/enml2.dtd">\n<en-note>' + inner + "</en-note>")


def enex_note_v10(n):
    """One <note> as Evernote 10 writes it (evernote-export4.dtd, indented, content after attributes)."""
    out = ["  <note>", "    <title>%s</title>" % xml_escape(n["title"]),
           "    <created>%s</created>" % enex_date(n["created"]),
           "    <updated>%s</updated>" % enex_date(n["updated"])]
    out += ["    <tag>%s</tag>" % xml_escape(t) for t in n.get("tags", [])]
    out.append("    <note-attributes>")
    for k, v in n.get("attributes", []):
        out.append("      <%s>%s</%s>" % (k, xml_escape(v), k))
    out.append("    </note-attributes>")
    out.append("    <content>")
    out.append("      <![CDATA[" + enml_doc(n["enml"]) + "      ]]>")
    out.append("    </content>")
    for task in n.get("tasks", []):  # Evernote Tasks (10.x): not note text, an importer skips them
        out += ["    <task>"] + ["      <%s>%s</%s>" % (k, xml_escape(v), k) for k, v in task] + ["    </task>"]
    for r in n.get("resources", []):
        out += ["    <resource>", '      <data encoding="base64">',
                wrap(base64.b64encode(r["data"]).decode(), 120), "      </data>",
                "      <mime>%s</mime>" % r["mime"], "      <width>%d</width>" % r["width"],
                "      <height>%d</height>" % r["height"], "      <resource-attributes>",
                "        <file-name>%s</file-name>" % xml_escape(r["file"])]
        if r.get("source-url"):
            out += ["        <source-url>", "          " + xml_escape(r["source-url"]), "        </source-url>"]
        out += ["      </resource-attributes>", "    </resource>"]
    out.append("  </note>")
    return "\n".join(out)


def enex_note_legacy(n):
    """One <note> as Evernote Mac 7 / Windows 6 wrote it (evernote-export3.dtd, one line,
    content before the dates)."""
    s = "<note><title>%s</title>" % xml_escape(n["title"])
    s += "<content><![CDATA[" + enml_doc(n["enml"], modern=False) + "]]></content>"
    s += "<created>%s</created><updated>%s</updated>" % (enex_date(n["created"]), enex_date(n["updated"]))
    s += "".join("<tag>%s</tag>" % xml_escape(t) for t in n.get("tags", []))
    s += "<note-attributes>" + "".join("<%s>%s</%s>" % (k, xml_escape(v), k) for k, v in n.get("attributes", [])) + "</note-attributes>"
    for r in n.get("resources", []):
        s += ('<resource><data encoding="base64">' + wrap(base64.b64encode(r["data"]).decode(), 80) + "</data>"
              "<mime>%s</mime><width>%d</width><height>%d</height><duration>0</duration>"
              "<resource-attributes><timestamp>19700101T000000Z</timestamp><file-name>%s</file-name>"
              "</resource-attributes></resource>" % (r["mime"], r["width"], r["height"], xml_escape(r["file"])))
    return s + "</note>"


def enex_file(notes, modern, export_date, version):
    if modern:
        head = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export4.dtd">\n'
                '<en-export export-date="%s" application="Evernote" version="%s">\n' % (export_date, version))
        return head + "\n".join(enex_note_v10(n) for n in notes) + "\n</en-export>\n"
    head = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export3.dtd">\n'
            '<en-export export-date="%s" application="Evernote" version="%s">\n' % (export_date, version))
    return head + "\n".join(enex_note_legacy(n) for n in notes) + "\n</en-export>\n"


def evernote():
    whiteboard = png(16, 16, 7)
    borscht = png(12, 8, 11)
    h_white = hashlib.md5(whiteboard).hexdigest()
    h_borscht = hashlib.md5(borscht).hexdigest()
    td = 'style="border-color:#ccc;border-width:1px;border-style:solid;padding:10px;"'
    long_paras = long_paragraphs(202, 25_000)

    work = [
        dict(title="Project kickoff 🚀", created="2024-01-15T08:30:00.000Z", updated="2024-02-20T17:45:12.000Z",
             tags=["work", "planning"], attributes=[("author", "Dana Müller")],
             enml=('<h1>Project Atlas — kickoff</h1>'
                   '<div>Owner: <b>Dana Müller</b>, sponsor: <i>Kenji Watanabe</i></div><div><br/></div>'
                   '<h2>Goals</h2><ul><li><div>Ship the <b>beta</b> by <i>March 15</i></div></li>'
                   '<li><div>Keep the budget under 40 k€</div></li>'
                   '<ul><li><div>Hardware: 12 k€</div></li><li><div>Contractors: 25 k€</div></li></ul></ul>'
                   '<h2>Milestones</h2><ol><li><div>Design review</div></li><li><div>Internal alpha</div></li>'
                   '<li><div>Public beta</div></li></ol><div><br/></div>'
                   '<h3>Checklist</h3><ul style="--en-todo:true;"><li style="--en-checked:true;"><div>Book the room</div></li>'
                   '<li style="--en-checked:false;"><div>Send the agenda</div></li>'
                   '<li style="--en-checked:false;"><div>Order 🍕 for 12</div></li></ul><div><br/></div>'
                   '<table width="376px" style="width:376px;border-collapse:collapse;"><colgroup><col style="width: 188px;"/>'
                   '<col style="width: 188px;"/></colgroup><tbody>'
                   '<tr><td %s><div><b>Role</b></div></td><td %s><div><b>Person</b></div></td></tr>'
                   '<tr><td %s><div>Design</div></td><td %s><div>Aiko 佐藤</div></td></tr>'
                   '<tr><td %s><div>Backend</div></td><td %s><div>Oleksandr Шевченко</div></td></tr>'
                   '</tbody></table><div><br/></div>'
                   '<div>Whiteboard photo:</div>'
                   '<en-media style="--en-naturalWidth:16; --en-naturalHeight:16;" hash="%s" type="image/png" />'
                   '<div><br/></div>'
                   '<div><div>Notes from the call:</div><div>Line one of a nested block<br/>and a second line after a break.</div></div>'
                   '<div>See <a href="https://example.com/atlas?tab=plan&amp;view=all">the plan</a> for details.</div>'
                   % (td, td, td, td, td, td, h_white)),
             tasks=[[("title", "Send the deck to Kenji"), ("created", "20240116T090000Z"), ("updated", "20240116T090000Z"),
                     ("taskStatus", "open"), ("taskFlag", "false"), ("sortWeight", "I"),
                     ("noteLevelID", "7c0e502c-07d9-436e-a702-af476a92f008"),
                     ("taskGroupNoteLevelID", "e92a07d0-47e8-4211-b2e9-221b81edc83f"),
                     ("statusUpdated", "20240116T090000Z"), ("creator", "123456"), ("lastEditor", "123456")]],
             resources=[dict(data=whiteboard, mime="image/png", width=16, height=16, file="whiteboard.png",
                             **{"source-url": "en-cache://tokenKey%3D%22AuthToken%3AUser%3A123456%22+0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0+"
                                + h_white + "+https://www.evernote.com/shard/s1/res/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"})]),
        dict(title="Espresso guide ☕", created="2023-09-03T06:12:44.000Z", updated="2023-09-03T06:12:44.000Z",
             tags=["coffee", "web-clip"],
             attributes=[("author", "Dana Müller"), ("source", "web.clip7"),
                         ("source-url", "https://example.com/espresso-guide?utm_source=evernote&ref=clip"),
                         ("source-application", "webclipper.evernote")],
             enml=('<div style="--en-clipped-content:fullPage; --en-clipped-source-url:https://example.com/espresso-guide; '
                   '--en-clipped-source-title:How to pull a better espresso;">'
                   '<div><span style="font-size: 24px; font-weight: bold;">How to pull a better espresso</span></div>'
                   '<div>Grind: <b>fine</b>, like table salt.</div>'
                   '<div>Dose: 18 g in, 36 g out, 25–30 s.</div>'
                   '<div>Source: <a href="https://example.com/espresso-guide">example.com</a></div></div>')),
        dict(title="Travel prep ✈️", created="2022-11-20T19:00:05.000Z", updated="2024-01-02T07:30:00.000Z",
             tags=["travel"],
             attributes=[("author", "Dana Müller"), ("reminder-order", "1704180600000"),
                         ("reminder-time", "20240110T080000Z")],
             enml=('<div><en-todo checked="true"/>Book flights to Osaka</div>'
                   '<div><en-todo checked="false"/>Renew passport</div>'
                   '<ul><li><div><en-todo checked="false"/>Pack the travel adapter</div></li>'
                   '<li><div>Print hotel confirmation</div></li></ul><div><br/></div>'
                   '<div>Packing list in <i>Notion</i> too.</div>')),
        dict(title="Untitled", created="2024-02-01T12:00:00.000Z", updated="2024-02-01T12:00:00.000Z",
             enml="<div><br/></div>"),
        dict(title="Meeting minutes archive", created="2021-03-04T09:00:00.000Z", updated="2023-12-22T16:40:31.000Z",
             tags=["work", "minutes"], attributes=[("author", "Dana Müller")],
             enml="<div><br/></div>".join("<div>%s</div>" % xml_escape(p) for p in long_paras)),
        dict(title="多言語メモ — Ελληνικά & العربية", created="2023-07-07T07:07:07.000Z",
             updated="2023-07-08T08:08:08.000Z", tags=["languages", "日本語"],
             enml=('<div>日本語: 今日はいい天気ですね。</div><div>Ελληνικά: Καλησπέρα!</div>'
                   '<div>العربية: مرحبا بالعالم</div><div>Emoji: 👩🏽‍💻 🏳️‍🌈 🇩🇪</div>'
                   '<div>Combining: e&#x301; vs é, Salt &amp; pepper</div>')),
    ]
    recipes = [
        dict(title="Борщ 🍲", created="2019-10-12T15:20:00.000Z", updated="2020-01-05T11:11:11.000Z",
             tags=["суп", "семья"], attributes=[("author", "Olga"), ("source", "desktop.mac"), ("reminder-order", "0")],
             enml=('<div><b>Ингредиенты</b></div><ul><li>Свёкла — 2 шт.</li><li>Капуста — 300 г</li>'
                   '<li>Картофель — 3 шт.</li></ul><div><b>Шаги</b></div><ol><li>Сварить бульон.</li>'
                   '<li>Добавить овощи.</li><li>Подавать со сметаной.</li></ol>'
                   '<div><en-todo checked="false"/>Купить укроп</div>'
                   '<div><en-media hash="%s" type="image/png"/></div><div><br/></div>' % h_borscht),
             resources=[dict(data=borscht, mime="image/png", width=12, height=8, file="borscht.png")]),
        dict(title="Pancakes / Блины", created="2018-02-14T08:00:00.000Z", updated="2018-02-14T08:30:00.000Z",
             tags=["breakfast"], attributes=[("author", "Olga"), ("source", "desktop.mac"), ("reminder-order", "0")],
             enml=('<div>Serves 4.</div><table><tr><th>Ingredient</th><th>Amount</th></tr>'
                   '<tr><td>Flour</td><td>250 g</td></tr><tr><td>Milk</td><td>500 ml</td></tr>'
                   '<tr><td>Eggs</td><td>2</td></tr></table><div>Rest the batter <i>30 min</i>.</div>')),
    ]
    files = {h_white: "whiteboard.png", h_borscht: "borscht.png"}

    write("evernote/Work Notes.enex", enex_file(work, True, "20240302T101500Z", "10.68.2"))
    write("evernote/Рецепты.enex", enex_file(recipes, False, "20200105T120000Z", "Evernote Mac 7.14 (458265)"))
    for path, notebook, notes in [("evernote/Work Notes.enex", "Work Notes", work),
                                  ("evernote/Рецепты.enex", "Рецепты", recipes)]:
        EXPECTED[path] = [
            note("evernote", "%s:%d" % (os.path.basename(path), i + 1), n["title"],
                 enml_to_markdown(enml_doc(n["enml"]), files), n.get("tags", []), notebook, False, False,
                 n["created"], n["updated"])
            for i, n in enumerate(notes)]

    # --- damaged or wrong files
    good = open(os.path.join(ROOT, "evernote/Work Notes.enex"), encoding="utf-8").read()
    cut = good.index("Oleksandr")
    write("evernote/malformed-truncated.enex", good[:cut])
    MALFORMED["evernote/malformed-truncated.enex"] = {
        "expect": "error",
        "why": "the export stops inside the first note's CDATA (an interrupted copy): not well-formed XML"}
    write("evernote/malformed-html-export.enex",
          '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="UTF-8">\n<meta name="exporter-version" content="Evernote Mac 7.14 (458265)"/>\n'
          '<meta name="created" content="2024-01-15 08:30:00 +0000"/>\n<title>Project kickoff 🚀</title>\n</head>\n'
          '<body>\n<div><span><h1>Project Atlas — kickoff</h1><div>Owner: <b>Dana Müller</b></div></span></div>\n</body>\n</html>\n')
    MALFORMED["evernote/malformed-html-export.enex"] = {
        "expect": "error",
        "why": "an Evernote 'Export as HTML' page renamed to .enex: the root element is <html>, not <en-export>"}
    partial = [
        dict(title="Fine note", created="2024-03-01T10:00:00.000Z", updated="2024-03-01T10:05:00.000Z",
             tags=["ok"], enml="<div>All fields present.</div>"),
    ]
    body = enex_note_v10(partial[0])
    no_content = ("  <note>\n    <title>No content</title>\n    <created>20240301T110000Z</created>\n"
                  "    <updated>20240301T110000Z</updated>\n    <note-attributes>\n    </note-attributes>\n  </note>")
    bad_dates = ("  <note>\n    <title>Bad dates</title>\n    <created>2024-02-30T25:61:00Z</created>\n"
                 "    <updated>someday</updated>\n    <note-attributes>\n    </note-attributes>\n    <content>\n"
                 "      <![CDATA[" + enml_doc("<div>Dates nobody can read.</div>") + "      ]]>\n    </content>\n  </note>")
    no_title = ("  <note>\n    <created>20240301T120000Z</created>\n    <updated>20240301T120000Z</updated>\n"
                "    <note-attributes>\n    </note-attributes>\n    <content>\n"
                "      <![CDATA[" + enml_doc("<div>A note with no title element.</div>") + "      ]]>\n    </content>\n  </note>")
    write("evernote/malformed-missing-fields.enex",
          '<?xml version="1.0" encoding="UTF-8"?>\n'
          '<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export4.dtd">\n'
          '<en-export export-date="20240302T101500Z" application="Evernote" version="10.68.2">\n'
          + "\n".join([body, no_content, bad_dates, no_title]) + "\n</en-export>\n")
    MALFORMED["evernote/malformed-missing-fields.enex"] = {
        "expect": "partial",
        "why": "well-formed XML, but one <note> has no <content> (skipped with a warning), one has unreadable "
               "<created>/<updated> (imported, dates not asserted), one has no <title> (imported with an empty title)",
        "skipped": 1,
        "notes": [
            note("evernote", "malformed-missing-fields.enex:1", "Fine note", "All fields present.", ["ok"],
                 "malformed-missing-fields", False, False, "2024-03-01T10:00:00.000Z", "2024-03-01T10:05:00.000Z"),
            note("evernote", "malformed-missing-fields.enex:3", "Bad dates", "Dates nobody can read.", [],
                 "malformed-missing-fields", False, False, None, None),
            note("evernote", "malformed-missing-fields.enex:4", "", "A note with no title element.", [],
                 "malformed-missing-fields", False, False, "2024-03-01T12:00:00.000Z", "2024-03-01T12:00:00.000Z"),
        ]}


# ----------------------------------------------------------------------------------------
# Google Keep via Google Takeout (Takeout/Keep/*.json, *.html, Labels.txt, attachments)
# ----------------------------------------------------------------------------------------

PACIFIC = timezone(timedelta(hours=-8))  # Takeout's zip entry times are US Pacific wall clock


def keep_json(obj):
    """Google writes compact JSON and escapes '/' as '\\/' (as in real Takeout files)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).replace("/", "\\/")


def keep_html(title, color, when, pinned, archived, trashed, text, items, labels, attachment):
    stamp = when.astimezone(PACIFIC)
    hour = stamp.hour % 12 or 12
    heading = "%s %d, %d, %d:%02d:%02d&#8239;%s" % (stamp.strftime("%b"), stamp.day, stamp.year, hour, stamp.minute,
                                                    stamp.second, "AM" if stamp.hour < 12 else "PM")
    icons = ""
    if pinned:
        icons += '<span class="pinned" title="Note pinned"></span>\n'
    if archived:
        icons += '<span class="archived" title="Note archived"></span>\n'
    if trashed:
        icons += '<span class="trashed" title="Note in trash"></span>\n'
    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = ('<?xml version="1.0" ?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
           '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd"><html xmlns="http://www.w3.org/1999/xhtml"><head>'
           '<meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />\n<title>%s</title>\n'
           '<style type="text/css">\n         body {\n  font-family: \'Roboto Condensed\',\'Droid Sans\',arial,sans-serif;\n'
           '  font-size: 15px;\n}\n.note .title {\n  font-size: 17px;\n  font-weight: bold;\n}\n.checked {\n'
           '  text-decoration: line-through;\n}\n.YELLOW {\n  background-color: rgb(255, 218, 0) !important;\n}\n'
           '      </style></head>\n<body><div class="note %s"><div class="heading"><div class="meta-icons">\n%s\n</div>\n'
           '%s</div>\n' % (esc(title), color, icons, heading))
    if title:
        out += '<div class="title">%s</div>\n' % esc(title)
    if items is not None:
        lis = []
        for it in items:
            cls = "listitem checked" if it["isChecked"] else "listitem"
            bullet = "&#9745;" if it["isChecked"] else "&#9744;"
            lis.append('<li class="%s"><span class="bullet">%s</span>\n<span class="text">%s</span>\n</li>'
                       % (cls, bullet, esc(it["text"])))
        out += '<div class="content"><ul class="list">%s</ul></div>\n' % " ".join(lis)
    else:
        out += '<div class="content">%s</div>\n' % esc(text).replace("\n", "<br>")
    if attachment:
        out += ('\n<div class="attachments"><ul><li><img alt="" src="data:%s;base64,%s" /></li></ul></div>\n'
                % (attachment[0], base64.b64encode(attachment[1]).decode()))
    if labels:
        out += '<div class="chips">\n' + " ".join(
            '<span class="chip label"><span class="label-name">%s</span>\n</span>' % esc(l) for l in labels) + "</div>\n"
    return out + "\n</div></body></html>"


def keep():
    sketch = png(16, 12, 23)
    sketch_name = "18d4b2a3c5e.8f7e6d5c4b3a2910.png"
    long_text = "\n\n".join(long_paragraphs(303, 25_000))
    notes = [
        dict(file="Groceries", title="Groceries", color="YELLOW", pinned=True,
             items=[("Milk", False), ("Eggs", True), ("Äpfel 🍎", False), ("Tofu 豆腐", True)],
             labels=["Home"], created="2024-01-20T09:15:30.123456Z", edited="2024-02-25T16:40:02.500000Z", html=True),
        dict(file="Ideas for Lisbon trip 🇵🇹", title="Ideas for Lisbon trip 🇵🇹", color="TEAL", archived=True,
             text="Pastéis de nata at Manteigaria\nTram 28 early in the morning\nMiradouro da Senhora do Monte at sunset 🌅\n"
                  "https://example.com/lisbon-guide",
             labels=["Travel"], created="2023-05-02T20:01:02.003004Z", edited="2023-05-09T06:07:08.009000Z",
             annotations=[{"description": "Where to eat, what to see.", "source": "WEBLINK",
                           "title": "Lisbon in three days", "url": "https://example.com/lisbon-guide"}],
             text_html=True, html=True),
        dict(file="2024-02-11T18_22_05.417+01_00", title="", color="BLUE",
             text="Call Dr. Nakamura — 03-1234-5678\nBring 保険証 and the referral letter.",
             created="2024-02-11T17:22:05.417000Z", edited="2024-02-12T08:00:00.000000Z"),
        dict(file="Old shopping list", title="Old shopping list", color="DEFAULT", trashed=True,
             items=[("Batteries (AA)", True), ("Light bulb", False)],
             labels=["Home"], created="2023-11-11T11:11:11.111000Z", edited="2024-01-02T03:04:05.678000Z"),
        dict(file="Sketch", title="Sketch", color="DEFAULT", text="",
             attachments=[{"filePath": sketch_name, "mimetype": "image/png"}],
             created="2024-02-14T14:14:14.140000Z", edited="2024-02-14T14:20:00.000000Z"),
        dict(file="Novel draft — chapter notes", title="Novel draft — chapter notes", color="PURPLE",
             text=long_text, labels=["Writing"], created=None, edited="2023-08-30T22:10:09.876000Z",
             sharees=[{"isOwner": True, "type": "WRITER", "email": "me@example.com"},
                      {"isOwner": False, "type": "WRITER", "email": "editor@example.com"}]),
        dict(file="Call mom ☎️", title="Call mom ☎️", color="DEFAULT", text="",
             created="2024-03-01T18:00:00.000000Z", edited="2024-03-01T18:00:00.000000Z"),
        dict(file="Mehrsprachig — 多言語 — Многоязычно", title="Mehrsprachig — 多言語 — Многоязычно", color="GREEN",
             text="Deutsch: Straße, Größe, Übung\n日本語: ありがとう\nРусский: спасибо\n한국어: 감사합니다\nעברית: תודה\nEmoji: 🙏🏾",
             labels=["Deutsch", "日本語"], created="2022-12-24T23:59:59.999999Z", edited="2023-01-01T00:00:00.000001Z"),
    ]
    entries = []
    expected = []
    for n in notes:
        obj = {}
        if n.get("attachments"):
            obj["attachments"] = n["attachments"]
        obj["color"] = n["color"]
        obj["isTrashed"] = bool(n.get("trashed"))
        obj["isPinned"] = bool(n.get("pinned"))
        obj["isArchived"] = bool(n.get("archived"))
        if "items" in n:
            obj["listContent"] = [{"text": t, "isChecked": c} for t, c in n["items"]]
        else:
            obj["textContent"] = n["text"]
            if n.get("text_html"):
                obj["textContentHtml"] = "".join(
                    '<p dir="ltr" style="line-height:1.38;margin-top:0.0pt;margin-bottom:0.0pt;"><span style="font-size:7.2pt;'
                    'font-family:\'Google Sans\';color:#000000;background-color:transparent;font-weight:400;font-style:normal;'
                    'font-variant:normal;text-decoration:none;vertical-align:baseline;white-space:pre;white-space:pre-wrap;">'
                    '%s</span></p>' % line for line in n["text"].split("\n"))
        obj["title"] = n["title"]
        edited = dt(n["edited"])
        obj["userEditedTimestampUsec"] = us(edited)
        if n["created"]:
            obj["createdTimestampUsec"] = us(dt(n["created"]))
        if n.get("labels"):
            obj["labels"] = [{"name": l} for l in n["labels"]]
        if n.get("annotations"):
            obj["annotations"] = n["annotations"]
        if n.get("sharees"):
            obj["sharees"] = n["sharees"]
        when = edited.astimezone(PACIFIC).timetuple()[:6]
        entries.append(("Takeout/Keep/%s.json" % n["file"], keep_json(obj).encode("utf-8"), when, 0))
        if n.get("html"):
            items = [{"text": t, "isChecked": c} for t, c in n["items"]] if "items" in n else None
            html = keep_html(n["title"], n["color"], edited, n.get("pinned"), n.get("archived"), n.get("trashed"),
                             n.get("text"), items, n.get("labels"), None)
            entries.append(("Takeout/Keep/%s.html" % n["file"], html.encode("utf-8"), when, 0))
        if n.get("attachments"):
            entries.append(("Takeout/Keep/" + sketch_name, sketch, when, 0))
        # Noted's reading
        if "items" in n:
            body = "\n".join(("- [x] " if c else "- [ ] ") + t for t, c in n["items"])
        else:
            body = n["text"]
        for a in n.get("attachments", []):
            body = (body + "\n\n" if body else "") + "[attachment skipped: %s]" % a["filePath"]
        tags = list(n.get("labels", [])) + (["archived"] if n.get("archived") else [])
        created = dt(n["created"]) if n["created"] else edited
        expected.append(note("keep", n["file"], n["title"], body, tags, None, bool(n.get("pinned")),
                             bool(n.get("trashed")), iso_ms(created), iso_ms(edited)))
    labels_txt = "Home\nTravel\nWriting\nDeutsch\n日本語\nUnused label\n"
    entries.insert(3, ("Takeout/Keep/Labels.txt", labels_txt.encode("utf-8"), (2024, 3, 2, 2, 15, 0), 0))
    browser = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Archive Overview</title></head>\n'
               '<body><h1>Your Google data archive</h1>\n<p>This archive contains data from 1 product: Keep.</p>\n'
               '<!-- Google\'s real archive_browser.html is ~300 KB of inline script and styles; abridged here. -->\n'
               '</body></html>\n')
    entries.append(("Takeout/archive_browser.html", browser.encode("utf-8"), (2024, 3, 2, 2, 15, 0), 0))
    zip_bytes = make_zip(entries, streaming=True)
    write("keep/takeout.zip", zip_bytes)
    for name, data, _, _ in entries:
        write("keep/" + name, data)
    EXPECTED["keep/Takeout"] = expected
    EXPECTED["keep/takeout.zip"] = "keep/Takeout"

    # --- damaged or wrong files
    groceries = entries[0][1]
    write("keep/malformed-truncated.json", groceries[: len(groceries) // 2])
    MALFORMED["keep/malformed-truncated.json"] = {"expect": "error", "why": "a Keep note's JSON cut in half"}
    tasks = {"kind": "tasks#taskLists", "items": [{
        "kind": "tasks#taskList", "id": "MDk4NzY1NDMyMTIzNDU2Nzg5MDE6MDow", "title": "My Tasks",
        "updated": "2024-02-01T10:00:00.000Z", "items": [{
            "kind": "tasks#task", "id": "dGFza18wMDE", "title": "File taxes", "updated": "2024-02-01T10:00:00.000Z",
            "selfLink": "https://www.googleapis.com/tasks/v1/lists/MDk4/tasks/dGFza18wMDE", "status": "needsAction",
            "due": "2024-04-15T00:00:00.000Z"}]}]}
    write("keep/malformed-google-tasks.json", json.dumps(tasks, indent=2))
    MALFORMED["keep/malformed-google-tasks.json"] = {
        "expect": "error",
        "why": "Takeout's Tasks.json (Google Tasks), picked from the same archive: valid JSON, but not a Keep note "
               "(no textContent/listContent/userEditedTimestampUsec; a 'kind' of tasks#taskLists)"}
    half = {"color": "DEFAULT", "isTrashed": False, "isPinned": False, "isArchived": False, "title": "Half a note",
            "createdTimestampUsec": "1704067200000000"}
    write("keep/malformed-missing-fields.json", keep_json(half))
    MALFORMED["keep/malformed-missing-fields.json"] = {
        "expect": "partial",
        "why": "neither textContent nor listContent (read as an empty body), no userEditedTimestampUsec, and "
               "createdTimestampUsec as a string: imported, dates not asserted",
        "skipped": 0,
        "notes": [note("keep", "malformed-missing-fields", "Half a note", "", [], None, False, False, None, None)]}
    write("keep/malformed-truncated-takeout.zip", zip_bytes[: len(zip_bytes) * 2 // 3])
    MALFORMED["keep/malformed-truncated-takeout.zip"] = {
        "expect": "error", "why": "takeout.zip cut at two thirds (an interrupted download)"}


# ----------------------------------------------------------------------------------------
# Standard Notes decrypted backup ("Standard Notes Backup and Import File.txt", version 004)
# ----------------------------------------------------------------------------------------

def lexical_text(text, fmt=0):
    return {"detail": 0, "format": fmt, "mode": "normal", "style": "", "text": text, "type": "text", "version": 1}


def lexical_block(kind, children, **extra):
    d = {"children": children, "direction": "ltr" if children else None, "format": "", "indent": 0,
         "type": kind, "version": 1}
    d.update(extra)
    return d


def lexical_to_markdown(state):
    """The reference reading of a Super note (Lexical editor state) that EXPECTED.json follows:
    one line per top-level block (as the editor shows them), empty paragraph = empty line."""

    def inline(nodes):
        out = ""
        for n in nodes:
            if n["type"] == "text":
                t = n["text"]
                if n.get("format", 0) & 2:
                    t = "*" + t + "*"
                if n.get("format", 0) & 1:
                    t = "**" + t + "**"
                out += t
            elif n["type"] == "link":
                out += "[%s](%s)" % (inline(n["children"]), n["url"])
            elif n["type"] == "linebreak":
                out += "\n"
            else:
                out += inline(n.get("children", []))
        return out

    def blocks(nodes, depth=0):
        lines = []
        for n in nodes:
            t = n["type"]
            if t == "heading":
                lines.append("#" * int(n["tag"][1]) + " " + inline(n["children"]))
            elif t == "list":
                for i, item in enumerate(n["children"]):
                    nested = [c for c in item["children"] if c["type"] == "list"]
                    if nested and len(nested) == len(item["children"]):
                        lines.extend(blocks(nested, depth + 1))
                        continue
                    if n["listType"] == "check":
                        marker = "- [x] " if item.get("checked") else "- [ ] "
                    elif n["listType"] == "number":
                        marker = "%d. " % item.get("value", i + 1)
                    else:
                        marker = "- "
                    lines.append("  " * depth + marker + inline(item["children"]))
            else:
                lines.extend(inline(n.get("children", [])).split("\n"))
        return lines

    lines = blocks(state["root"]["children"])
    while lines and lines[0] == "":
        lines.pop(0)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


def standardnotes():
    def stamp(iso):
        d = dt(iso)
        return us(d) + 123  # the server keeps microseconds; ISO strings carry milliseconds

    uuid = {
        "prefs": "0c6f7e1a-2b3c-4d5e-8f90-a1b2c3d4e5f6", "component": "1d7e8f2b-3c4d-4e6f-9a01-b2c3d4e5f607",
        "smart": "2e8f9a3c-4d5e-4f70-8b12-c3d4e5f60718",
        "work": "3f9a0b4d-5e6f-4081-9c23-d4e5f6071829", "clients": "4a0b1c5e-6f70-4192-8d34-e5f60718293a",
        "diary": "5b1c2d6f-7081-42a3-9e45-f60718293a4b", "recipes": "6c2d3e70-8192-43b4-8f56-0718293a4b5c",
        "meeting": "7d3e4f81-92a3-44c5-9067-18293a4b5c6d", "tokyo": "8e4f5092-a3b4-45d6-8178-293a4b5c6d7e",
        "super": "9f5061a3-b4c5-46e7-9289-3a4b5c6d7e8f", "long": "a06172b4-c5d6-47f8-839a-4b5c6d7e8f90",
        "empty": "b17283c5-d6e7-4809-94ab-5c6d7e8f9001", "trashed": "c28394d6-e7f8-491a-85bc-6d7e8f900112",
        "archived": "d394a5e7-f809-4a2b-96cd-7e8f90011223", "protected": "e4a5b6f8-091a-4b3c-87de-8f9001122334",
    }
    state = {"root": lexical_block("root", [
        lexical_block("heading", [lexical_text("Launch checklist")], tag="h1"),
        lexical_block("paragraph", [lexical_text("Everything before "), lexical_text("Friday", 1),
                                    lexical_text(" — see "),
                                    lexical_block("link", [lexical_text("the runbook")], rel="noreferrer", target=None,
                                                  title=None, url="https://example.com/runbook"),
                                    lexical_text(".")], textFormat=0, textStyle=""),
        lexical_block("list", [
            lexical_block("listitem", [lexical_text("Freeze the API")], checked=True, value=1),
            lexical_block("listitem", [lexical_text("Write release notes ✍️")], checked=False, value=2),
            lexical_block("listitem", [lexical_text("Tell support", 2)], checked=False, value=3),
        ], listType="check", start=1, tag="ul"),
        lexical_block("paragraph", [], textFormat=0, textStyle=""),
        lexical_block("heading", [lexical_text("Owners")], tag="h2"),
        lexical_block("list", [
            lexical_block("listitem", [lexical_text("Ana — backend")], value=1),
            lexical_block("listitem", [lexical_text("Bo — 前端")], value=2),
        ], listType="number", start=1, tag="ol"),
    ])}
    state["root"]["direction"] = "ltr"
    long_text = "\n\n".join(long_paragraphs(404, 25_000))

    def app(client_updated, **flags):
        d = {}
        d.update(flags)
        d["client_updated_at"] = client_updated
        return {"org.standardnotes.sn": d}

    def preview(text):
        return text[:160] + ("..." if len(text) > 160 else "")

    notes = [
        dict(key="meeting", title="Meeting notes 📝",
             text="## Agenda\n- [x] Review Q4 numbers\n- [ ] Plan the offsite 🏕️\n\n**Owner:** Sam\n",
             noteType="markdown", editor="com.standardnotes.markdown-visual",
             created="2024-01-10T09:00:00.000Z", updated="2024-02-20T10:30:00.700Z",
             client="2024-02-20T10:30:00.412Z", flags=dict(pinned=True), expected_tags=["Work/Clients"]),
        dict(key="tokyo", title="東京旅行の計画",
             text="1日目: 浅草と上野\n2日目: 鎌倉 🏯\n3日目: 渋谷でショッピング",
             noteType="plain-text", editor="com.standardnotes.plain-text",
             created="2023-09-01T00:00:00.000Z", updated="2023-09-05T12:34:56.789Z",
             client="2023-09-05T12:34:56.500Z", expected_tags=["日記"]),
        dict(key="super", title="Launch checklist ✅", text=json.dumps(state, ensure_ascii=False, separators=(",", ":")),
             preview="Launch checklist Everything before Friday — see the runbook. Freeze the API Write release notes ✍️ Tell support Owners Ana — backend Bo — 前端",
             noteType="super", editor="com.standardnotes.super-editor",
             created="2024-02-01T08:00:00.000Z", updated="2024-02-28T16:00:00.300Z",
             client="2024-02-28T16:00:00.100Z", expected_tags=["Work"],
             expected_body=lexical_to_markdown(state)),
        dict(key="long", title="Research notes", text=long_text, noteType="plain-text",
             editor="com.standardnotes.plain-text",
             created="2022-04-04T04:04:04.404Z", updated="2023-12-12T12:12:12.121Z", client="2023-12-12T12:12:12.000Z",
             expected_tags=[]),
        dict(key="empty", title="", text="", noteType="plain-text", editor="com.standardnotes.plain-text",
             created="2024-03-01T07:00:00.000Z", updated="2024-03-01T07:00:00.250Z", client="2024-03-01T07:00:00.100Z",
             expected_tags=[]),
        dict(key="trashed", title="Draft that didn't make it", text="Too long, too late.",
             noteType="plain-text", editor="com.standardnotes.plain-text", top=dict(trashed=True),
             created="2023-03-03T03:03:03.303Z", updated="2023-04-04T04:04:04.404Z", client="2023-04-04T04:04:04.000Z",
             expected_tags=[]),
        dict(key="archived", title="2022 taxes", text="Filed on 2023-04-10. Refund: 312,45 €.",
             noteType="plain-text", editor="com.standardnotes.plain-text", flags=dict(archived=True),
             created="2023-01-15T10:00:00.000Z", updated="2023-04-10T18:00:00.900Z", client="2023-04-10T18:00:00.800Z",
             expected_tags=["Work", "archived"]),
        dict(key="protected", title="Passport number", text="X1234567 — expires 2031-05-01",
             noteType="plain-text", editor="com.standardnotes.plain-text", top=dict(protected=True),
             created="2021-05-01T09:09:09.090Z", updated="2024-01-05T09:55:13.456Z",
             client="Fri Jan 05 2024 10:55:12 GMT+0100 (Central European Standard Time)",
             expected_tags=[]),
    ]
    tags = [
        dict(key="work", title="Work", refs=["super", "archived"], created="2021-01-01T00:00:00.000Z",
             updated="2024-02-28T16:01:00.000Z", extra=dict(expanded=True)),
        dict(key="clients", title="Clients", parent="work", refs=["meeting"], created="2021-02-01T00:00:00.000Z",
             updated="2024-02-20T10:31:00.000Z"),
        dict(key="diary", title="日記", refs=["tokyo"], created="2023-09-01T00:00:00.000Z",
             updated="2023-09-05T12:35:00.000Z"),
        dict(key="recipes", title="recipes", refs=[], created="2020-06-06T06:06:06.606Z",
             updated="2020-06-06T06:06:06.606Z"),
    ]

    def item(key, content_type, content, created, updated):
        return {"content_type": content_type, "content": content, "created_at_timestamp": us(dt(created)),
                "created_at": created, "deleted": False, "duplicate_of": None,
                "updated_at_timestamp": stamp(updated), "updated_at": updated, "uuid": uuid[key]}

    items = [item("prefs", "SN|UserPreferences", {
        "references": [], "appData": {"org.standardnotes.sn": {
            "client_updated_at": "Sat Mar 02 2024 11:10:42 GMT+0100 (Central European Standard Time)"}}},
        "2021-01-01T00:00:00.000Z", "2024-03-02T10:10:42.000Z")]
    items.append(item("component", "SN|Component", {
        "name": "Markdown Visual", "area": "editor-editor", "valid_until": "2030-01-01T00:00:00.000Z",
        "package_info": {"identifier": "com.standardnotes.markdown-visual", "name": "Markdown Visual",
                         "version": "1.0.7", "note_type": "markdown", "file_type": "md"},
        "active": None, "references": [],
        "appData": {"org.standardnotes.sn": {"client_updated_at": "2023-06-01T00:00:00.000Z"}}},
        "2023-06-01T00:00:00.000Z", "2023-06-01T00:00:00.000Z"))
    for n in notes:
        c = {"text": n["text"], "title": n["title"], "noteType": n["noteType"], "editorIdentifier": n["editor"],
             "references": []}
        c.update(n.get("top", {}))
        c["appData"] = app(n["client"], **n.get("flags", {}))
        if n["text"]:
            c["preview_plain"] = n.get("preview") or preview(n["text"])
        items.append(item(n["key"], "Note", c, n["created"], n["updated"]))
        if n["key"] == "tokyo":
            for t in tags:
                refs = []
                if t.get("parent"):
                    refs.append({"uuid": uuid[t["parent"]], "content_type": "Tag", "reference_type": "TagToParentTag"})
                refs += [{"uuid": uuid[r], "content_type": "Note"} for r in t["refs"]]
                tc = {"title": t["title"], "references": refs}
                tc.update(t.get("extra", {}))
                tc["appData"] = app(t["updated"][:-5] + ".000Z")
                items.append(item(t["key"], "Tag", tc, t["created"], t["updated"]))
    items.append(item("smart", "SN|SmartTag", {
        "title": "Pinned this week", "predicate": {"keypath": "pinned", "operator": "=", "value": True},
        "references": [], "appData": {"org.standardnotes.sn": {"client_updated_at": "2024-01-01T00:00:00.000Z"}}},
        "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z"))
    backup = json.dumps({"version": "004", "items": items}, ensure_ascii=False, indent=2).encode("utf-8")
    write("standardnotes/Standard Notes Backup and Import File.txt", backup)

    entries = [("Standard Notes Backup and Import File.txt", backup, (2024, 3, 2, 11, 15, 0), 0)]
    for it in items:
        folder = "Items/%s/" % re.sub(r'[/?<>\\:*|"]', "_", it["content_type"])
        if it["content_type"] == "Note":
            name, contents = it["content"]["title"], it["content"]["text"]
        else:
            name, contents = it["content_type"], json.dumps(it["content"], ensure_ascii=False, indent=2)
        name = re.sub(r'[/?<>\\:*|"]', "_", name or "")
        entries.append((folder + "%s-%s.txt" % (name.replace("|", "_"), it["uuid"].split("-")[0]),
                        contents.encode("utf-8"), (2024, 3, 2, 11, 15, 0), 0))
    write("standardnotes/Standard Notes Backup - Sat Mar 02 2024 11_15_00 GMT+0100.zip",
          make_zip(entries, streaming=True))

    expected = []
    for n in notes:
        client = n["client"]
        updated = client if re.match(r"^\d{4}-\d\d-\d\dT", client) else n["updated"]
        expected.append(note("standardnotes", uuid[n["key"]], n["title"], n.get("expected_body", n["text"]),
                             n["expected_tags"], None, bool(n.get("flags", {}).get("pinned")),
                             bool(n.get("top", {}).get("trashed")), n["created"], updated))
    EXPECTED["standardnotes/Standard Notes Backup and Import File.txt"] = expected
    EXPECTED["standardnotes/Standard Notes Backup - Sat Mar 02 2024 11_15_00 GMT+0100.zip"] = "standardnotes/Standard Notes Backup and Import File.txt"

    # --- damaged or wrong files
    write("standardnotes/malformed-truncated.txt", backup[: len(backup) // 3])
    MALFORMED["standardnotes/malformed-truncated.txt"] = {
        "expect": "error", "why": "the backup JSON cut at a third (an interrupted download)"}
    enc = {"version": "004", "keyParams": {
        "identifier": "sam@example.com", "pw_nonce": "9f3c1e7a5b2d4f6a8c0e1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d",
        "version": "004", "origination": "registration", "created": "1609459200000"},
        "items": [{"uuid": uuid["meeting"], "content_type": "Note",
                   "content": "004:6e9b1a2c3d4e5f60718293a4:U2FsdGVkX1+4vW0k2m7l0Zq9yJ3x8QmV1c0aB7kR2sE=:eyJ1IjoiN2QzZTRmODEifQ==",
                   "enc_item_key": "004:0a1b2c3d4e5f60718293a4b5:c2VjcmV0IGtleSBjaXBoZXJ0ZXh0:eyJ1IjoiN2QzZTRmODEifQ==",
                   "items_key_id": "f0e1d2c3-b4a5-4697-8879-6a5b4c3d2e1f",
                   "created_at": "2024-01-10T09:00:00.000Z", "updated_at": "2024-02-20T10:30:00.700Z",
                   "created_at_timestamp": 1704877200000123, "updated_at_timestamp": 1708425000700123,
                   "deleted": False, "duplicate_of": None}]}
    write("standardnotes/malformed-encrypted-backup.txt", json.dumps(enc, indent=2))
    MALFORMED["standardnotes/malformed-encrypted-backup.txt"] = {
        "expect": "error",
        "why": "an encrypted backup ('Standard Notes Encrypted Backup and Import File - ….txt'): keyParams at the top, "
               "every content a '004:…' string. The message should say to download a decrypted backup"}
    errored = [{"uuid": uuid["tokyo"], "content_type": "Note", "content": "004:abc:def:ghi",
                "enc_item_key": "004:jkl:mno:pqr", "items_key_id": "f0e1d2c3-b4a5-4697-8879-6a5b4c3d2e1f",
                "created_at": "2023-09-01T00:00:00.000Z", "updated_at": "2023-09-05T12:34:56.789Z",
                "deleted": False, "errorDecrypting": True}]
    write("standardnotes/malformed-errored-items.txt", json.dumps(errored))
    MALFORMED["standardnotes/malformed-errored-items.txt"] = {
        "expect": "error",
        "why": "'errored-items.txt' (what Standard Notes saves for items it cannot decrypt): the top level is an array"}
    partial = {"version": "004", "items": [
        {"content_type": "Note", "uuid": "f5b6c7d8-e9fa-4b0c-9d1e-2f3a4b5c6d7e", "created_at": "2024-03-01T10:00:00.000Z",
         "updated_at": "2024-03-01T10:00:00.000Z", "content": {"title": "Fine", "text": "Nothing wrong here.",
                                                               "references": [], "appData": {}}},
        {"content_type": "Note", "uuid": "06c7d8e9-fa0b-4c1d-8e2f-3a4b5c6d7e8f", "created_at": "2024-03-01T10:00:00.000Z",
         "updated_at": "2024-03-01T10:00:00.000Z", "content": "004:still:encrypted:payload"},
        {"content_type": "Note", "uuid": "17d8e9fa-0b1c-4d2e-9f3a-4b5c6d7e8f90", "created_at": "last tuesday",
         "updated_at": "2024-13-01T00:00:00.000Z", "content": {"title": "Weird dates", "references": []}},
        {"content_type": "Tag", "uuid": "28e9fa0b-1c2d-4e3f-8a4b-5c6d7e8f9001", "created_at": "2024-03-01T10:00:00.000Z",
         "updated_at": "2024-03-01T10:00:00.000Z",
         "content": {"title": "dangling", "references": [{"uuid": "ffffffff-ffff-4fff-bfff-ffffffffffff",
                                                          "content_type": "Note"},
                                                         {"uuid": "f5b6c7d8-e9fa-4b0c-9d1e-2f3a4b5c6d7e",
                                                          "content_type": "Note"}]}},
    ]}
    write("standardnotes/malformed-missing-fields.txt", json.dumps(partial, ensure_ascii=False, indent=2))
    MALFORMED["standardnotes/malformed-missing-fields.txt"] = {
        "expect": "partial",
        "why": "one Note's content is still an encrypted '004:…' string (skipped with a warning); one has no text "
               "(empty body) and unreadable dates (dates not asserted); a tag references a note that is not there "
               "(that reference ignored); appData without org.standardnotes.sn",
        "skipped": 1,
        "notes": [
            note("standardnotes", "f5b6c7d8-e9fa-4b0c-9d1e-2f3a4b5c6d7e", "Fine", "Nothing wrong here.", ["dangling"],
                 None, False, False, "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:00.000Z"),
            note("standardnotes", "17d8e9fa-0b1c-4d2e-9f3a-4b5c6d7e8f90", "Weird dates", "", [], None, False, False,
                 None, None),
        ]}


# ----------------------------------------------------------------------------------------
# Joplin RAW export and JEX (BaseItem.serialize; InteropService_Exporter_Raw / _Jex)
# ----------------------------------------------------------------------------------------

NOTE_FIELDS = ["id", "parent_id", "created_time", "updated_time", "is_conflict", "latitude", "longitude", "altitude",
               "author", "source_url", "is_todo", "todo_due", "todo_completed", "source", "source_application",
               "application_data", "order", "user_created_time", "user_updated_time", "encryption_cipher_text",
               "encryption_applied", "markup_language", "is_shared", "share_id", "conflict_original_id",
               "master_key_id", "user_data", "deleted_time", "type_"]
FOLDER_FIELDS = ["id", "created_time", "updated_time", "user_created_time", "user_updated_time",
                 "encryption_cipher_text", "encryption_applied", "parent_id", "is_shared", "share_id", "master_key_id",
                 "icon", "user_data", "deleted_time", "type_"]
TAG_FIELDS = ["id", "created_time", "updated_time", "user_created_time", "user_updated_time", "encryption_cipher_text",
              "encryption_applied", "is_shared", "parent_id", "user_data", "type_"]
NOTE_TAG_FIELDS = ["id", "note_id", "tag_id", "created_time", "updated_time", "user_created_time", "user_updated_time",
                   "encryption_cipher_text", "encryption_applied", "is_shared", "type_"]
RESOURCE_FIELDS = ["id", "mime", "filename", "created_time", "updated_time", "user_created_time", "user_updated_time",
                   "file_extension", "encryption_cipher_text", "encryption_applied", "encryption_blob_encrypted", "size",
                   "is_shared", "share_id", "master_key_id", "user_data", "blob_updated_time", "ocr_text",
                   "ocr_details", "ocr_status", "ocr_error", "type_"]
JOPLIN_TIMES = {"created_time", "updated_time", "user_created_time", "user_updated_time"}


def joplin_serialize(fields, item, title=None, body=None):
    """BaseItem.serialize: the title, the body if non-empty, then 'key: value' lines, all
    joined by blank lines; times as YYYY-MM-DDTHH:mm:ss.SSSZ; newlines in values escaped."""
    props = []
    for key in fields:
        value = item.get(key, "")
        if key in JOPLIN_TIMES:
            value = iso_ms(datetime.fromtimestamp(value / 1000, UTC)) if value else ""
        value = "" if value is None else str(value)
        value = value.replace("\\n", "\\\\n").replace("\\r", "\\\\r").replace("\n", "\\n").replace("\r", "\\r")
        props.append("%s: %s" % (key, value))
    parts = []
    if title is not None:
        parts.append(title)
    if body:
        parts.append(body)
    parts.append("\n".join(props))
    return "\n\n".join(parts)


def joplin():
    t = lambda s: ms(dt(s))
    ids = {k: hashlib.md5(("joplin-" + k).encode()).hexdigest() for k in [
        "personal", "projects", "web", "projb", "urgent", "family", "reading",
        "welcome", "plan", "spec", "domain", "invoice", "journal", "empty", "old", "imported", "diagram"]}
    folders = [
        dict(key="personal", title="Personal 🏠", parent="", c="2022-01-01T10:00:00.000Z", u="2023-06-01T10:00:00.000Z"),
        dict(key="projects", title="Projects", parent="", c="2022-01-02T10:00:00.000Z", u="2022-01-02T10:00:00.000Z"),
        dict(key="web", title="Website 🌐", parent="projects", c="2022-03-03T10:00:00.000Z",
             u="2023-01-01T10:00:00.000Z"),
        dict(key="projb", title="Проект Б", parent="web", c="2023-02-02T10:00:00.000Z", u="2023-02-02T10:00:00.000Z"),
    ]
    tags = [dict(key="urgent", title="urgent"), dict(key="family", title="家族"), dict(key="reading", title="reading")]
    diagram = png(20, 10, 31)
    notes = [
        dict(key="welcome", title="Welcome back", parent="personal",
             body="# Welcome back\n\nThis is **Joplin**, exported as RAW. See [the plan](:/%s).\n\n"
                  "- [ ] Water the plants 🌱\n- [x] Pay rent\n\n> Quote: „Gut gemacht“ — Oma" % ids["plan"],
             c="2023-05-01T08:00:00.000Z", u="2024-02-02T20:20:20.202Z", tags=["urgent", "family"]),
        dict(key="plan", title="Site redesign plan", parent="web",
             body="## Goals\n\n1. Faster pages\n2. Dark mode 🌙\n\n| Page | Owner |\n|------|-------|\n| Home | Ana |\n"
                  "| Blog | 李 |\n\n- [x] Audit\n- [ ] Mockups",
             c="2023-03-10T09:30:00.000Z", u="2024-01-31T23:59:59.999Z", tags=["reading"]),
        dict(key="spec", title="Спецификация", parent="projb",
             body="Требования к проекту Б.\n\n![diagram.png](:/%s)\n\nСрок: до конца квартала." % ids["diagram"],
             c="2023-02-02T11:00:00.000Z", u="2023-02-10T15:45:00.000Z", tags=[]),
        dict(key="domain", title="Renew domain", parent="projects", is_todo=1, todo_due=t("2024-04-01T09:00:00.000Z"),
             body="Registrar: example-registrar\nExpires: 2024-04-01",
             c="2024-01-15T12:00:00.000Z", u="2024-01-15T12:05:00.000Z", tags=["urgent"]),
        dict(key="invoice", title="Pay invoice №42", parent="projects", is_todo=1,
             todo_completed=t("2024-02-01T10:00:00.000Z"), body="",
             c="2024-01-20T12:00:00.000Z", u="2024-02-01T10:00:00.000Z", tags=[]),
        dict(key="journal", title="Journal 2023", parent="personal",
             body="\n\n".join(long_paragraphs(505, 25_000)),
             c="2023-01-01T06:00:00.000Z", u="2023-12-31T22:00:00.000Z", tags=["family"]),
        dict(key="empty", title="", parent="personal", body="",
             c="2024-02-29T23:00:00.000Z", u="2024-02-29T23:00:00.000Z", tags=[]),
        dict(key="old", title="Old draft", parent="web", body="Lorem ipsum, never finished.",
             deleted=t("2024-02-03T04:05:06.007Z"),
             c="2022-06-06T06:06:06.066Z", u="2022-06-07T07:07:07.077Z", tags=["reading"]),
        dict(key="imported", title="Imported from Evernote", parent="personal",
             body="Original note from 2015, imported into Joplin in 2024.\n",
             c="2015-06-01T12:00:00.000Z", u="2015-06-02T12:00:00.000Z", sync_c="2024-03-01T09:00:00.000Z",
             sync_u="2024-03-01T09:00:01.000Z", author="Dana Müller", source="evernote",
             source_url="https://example.com/original", tags=[]),
    ]
    files = []
    for f in folders:
        item = dict(id=ids[f["key"]], created_time=t(f["c"]), updated_time=t(f["u"]), user_created_time=t(f["c"]),
                    user_updated_time=t(f["u"]), encryption_cipher_text="", encryption_applied=0,
                    parent_id=ids[f["parent"]] if f["parent"] else "", is_shared=0, share_id="", master_key_id="",
                    icon="", user_data="", deleted_time=0, type_=2)
        files.append((ids[f["key"]] + ".md", joplin_serialize(FOLDER_FIELDS, item, f["title"])))
    for g in tags:
        item = dict(id=ids[g["key"]], created_time=t("2023-01-01T00:00:00.000Z"), updated_time=t("2023-01-01T00:00:00.000Z"),
                    user_created_time=t("2023-01-01T00:00:00.000Z"), user_updated_time=t("2023-01-01T00:00:00.000Z"),
                    encryption_cipher_text="", encryption_applied=0, is_shared=0, parent_id="", user_data="", type_=5)
        files.append((ids[g["key"]] + ".md", joplin_serialize(TAG_FIELDS, item, g["title"])))
    expected = []
    paths = {}
    for f in folders:
        chain, k = [], f["key"]
        while k:
            ff = next(x for x in folders if x["key"] == k)
            chain.insert(0, ff["title"])
            k = ff["parent"]
        paths[f["key"]] = "/".join(chain)
    for n in notes:
        created, updated = t(n["c"]), t(n["u"])
        item = dict(id=ids[n["key"]], parent_id=ids[n["parent"]],
                    created_time=t(n.get("sync_c", n["c"])), updated_time=t(n.get("sync_u", n["u"])),
                    is_conflict=0, latitude="0.00000000", longitude="0.00000000", altitude="0.0000",
                    author=n.get("author", ""), source_url=n.get("source_url", ""), is_todo=n.get("is_todo", 0),
                    todo_due=n.get("todo_due", 0), todo_completed=n.get("todo_completed", 0),
                    source=n.get("source", "joplin-desktop"), source_application="net.cozic.joplin-desktop",
                    application_data="", order=created if n["key"] != "empty" else 0, user_created_time=created,
                    user_updated_time=updated, encryption_cipher_text="", encryption_applied=0, markup_language=1,
                    is_shared=0, share_id="", conflict_original_id="", master_key_id="", user_data="",
                    deleted_time=n.get("deleted", 0), type_=1)
        files.append((ids[n["key"]] + ".md", joplin_serialize(NOTE_FIELDS, item, n["title"], n["body"])))
        for tag in n["tags"]:
            link_id = hashlib.md5(("joplin-link-%s-%s" % (n["key"], tag)).encode()).hexdigest()
            link = dict(id=link_id, note_id=ids[n["key"]], tag_id=ids[tag], created_time=updated, updated_time=updated,
                        user_created_time=updated, user_updated_time=updated, encryption_cipher_text="",
                        encryption_applied=0, is_shared=0, type_=6)
            files.append((link_id + ".md", joplin_serialize(NOTE_TAG_FIELDS, link)))
        expected.append(note("joplin", ids[n["key"]], n["title"], n["body"],
                             [next(g["title"] for g in tags if g["key"] == k) for k in n["tags"]],
                             paths[n["parent"]], False, bool(n.get("deleted")), iso_ms(datetime.fromtimestamp(created / 1000, UTC)),
                             iso_ms(datetime.fromtimestamp(updated / 1000, UTC))))
    res = dict(id=ids["diagram"], mime="image/png", filename="", created_time=t("2023-02-02T11:01:00.000Z"),
               updated_time=t("2023-02-02T11:01:00.000Z"), user_created_time=t("2023-02-02T11:01:00.000Z"),
               user_updated_time=t("2023-02-02T11:01:00.000Z"), file_extension="png", encryption_cipher_text="",
               encryption_applied=0, encryption_blob_encrypted=0, size=len(diagram), is_shared=0, share_id="",
               master_key_id="", user_data="", blob_updated_time=t("2023-02-02T11:01:00.000Z"), ocr_text="",
               ocr_details="", ocr_status=0, ocr_error="", type_=4)
    files.append((ids["diagram"] + ".md", joplin_serialize(RESOURCE_FIELDS, res, "diagram.png")))
    files.sort()
    files = [(p, d.encode("utf-8")) for p, d in files] + [("resources/%s.png" % ids["diagram"], diagram)]
    for p, d in files:
        write("joplin/raw/" + p, d)
    EXPECTED["joplin/raw"] = expected
    EXPECTED["joplin/export.jex"] = "joplin/raw"

    def tar(members):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for p, d in members:
                info = tarfile.TarInfo(p)
                info.size = len(d)
                info.mtime = int(dt("2024-03-02T10:20:30.000Z").timestamp())
                info.mode = 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tf.addfile(info, io.BytesIO(d))
        return buf.getvalue()

    jex = tar(files)
    write("joplin/export.jex", jex)

    # --- damaged or wrong files
    write("joplin/malformed-truncated.jex", jex[: len(jex) // 2 + 100])
    MALFORMED["joplin/malformed-truncated.jex"] = {
        "expect": "error", "why": "export.jex cut in the middle of a member (an interrupted copy); no end-of-archive blocks"}
    write("joplin/malformed-zip-renamed.jex",
          make_zip([(p, d, (2024, 3, 2, 10, 20, 30), 3) for p, d in files[:4]]))
    MALFORMED["joplin/malformed-zip-renamed.jex"] = {
        "expect": "error", "why": "a .zip renamed to .jex: JEX is a plain (not gzipped) tar, this is a zip"}
    inbox = hashlib.md5(b"bad-inbox").hexdigest()
    good = hashlib.md5(b"bad-good").hexdigest()
    orphan = hashlib.md5(b"bad-orphan").hexdigest()
    notype = hashlib.md5(b"bad-notype").hexdigest()
    baddate = hashlib.md5(b"bad-date").hexdigest()
    garbage = hashlib.md5(b"bad-garbage").hexdigest()
    link = hashlib.md5(b"bad-link").hexdigest()

    def simple_note(i, parent, title, body, c="2024-03-01T10:00:00.000Z"):
        created = t(c)
        item = dict(id=i, parent_id=parent, created_time=created, updated_time=created, is_conflict=0,
                    latitude="0.00000000", longitude="0.00000000", altitude="0.0000", is_todo=0, todo_due=0,
                    todo_completed=0, source="joplin-desktop", source_application="net.cozic.joplin-desktop",
                    order=0, user_created_time=created, user_updated_time=created, encryption_applied=0,
                    markup_language=1, is_shared=0, deleted_time=0, type_=1)
        return joplin_serialize(NOTE_FIELDS, item, title, body)

    folder_item = dict(id=inbox, created_time=t("2024-03-01T09:00:00.000Z"), updated_time=t("2024-03-01T09:00:00.000Z"),
                       user_created_time=t("2024-03-01T09:00:00.000Z"), user_updated_time=t("2024-03-01T09:00:00.000Z"),
                       encryption_applied=0, parent_id="", is_shared=0, deleted_time=0, type_=2)
    bad = {
        inbox: joplin_serialize(FOLDER_FIELDS, folder_item, "Inbox"),
        good: simple_note(good, inbox, "Still fine", "This one is intact."),
        orphan: simple_note(orphan, "0123456789abcdef0123456789abcdef", "Orphan", "Its notebook is not in the export."),
        notype: simple_note(notype, inbox, "No type", "The type_ line is missing.").rsplit("\ntype_: 1", 1)[0],
        baddate: simple_note(baddate, inbox, "Bad dates", "Unreadable timestamps.").replace(
            "created_time: 2024-03-01T10:00:00.000Z", "created_time: 2024-13-45T99:99:99.000Z").replace(
            "user_created_time: 2024-03-01T10:00:00.000Z", "user_created_time: 2024-13-45T99:99:99.000Z").replace(
            "updated_time: 2024-03-01T10:00:00.000Z", "updated_time: not-a-date"),
        garbage: simple_note(garbage, inbox, "Garbled", "Metadata got mangled.").replace(
            "\nis_conflict: 0", "\nthis line has no colon\nis_conflict: 0"),
        link: joplin_serialize(NOTE_TAG_FIELDS, dict(id=link, note_id=good, tag_id="fedcba9876543210fedcba9876543210",
                                                     created_time=t("2024-03-01T10:00:00.000Z"),
                                                     updated_time=t("2024-03-01T10:00:00.000Z"),
                                                     user_created_time=t("2024-03-01T10:00:00.000Z"),
                                                     user_updated_time=t("2024-03-01T10:00:00.000Z"),
                                                     encryption_applied=0, is_shared=0, type_=6)),
    }
    for i, text in sorted(bad.items()):
        write("joplin/malformed-raw-export/%s.md" % i, text)
    MALFORMED["joplin/malformed-raw-export"] = {
        "expect": "partial",
        "why": "a RAW export with damaged items: one has no type_ line and one has a metadata line without ':' "
               "(Joplin itself rejects both: skipped with warnings); one note's parent_id names no folder in the "
               "export (imported with folder null); one has unreadable times (dates not asserted); a note-tag "
               "link names a tag that is not there (ignored)",
        "skipped": 2,
        "notes": [
            note("joplin", good, "Still fine", "This one is intact.", [], "Inbox", False, False,
                 "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:00.000Z"),
            note("joplin", orphan, "Orphan", "Its notebook is not in the export.", [], None, False, False,
                 "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:00.000Z"),
            note("joplin", baddate, "Bad dates", "Unreadable timestamps.", [], "Inbox", False, False, None, None),
        ]}


# ----------------------------------------------------------------------------------------
# A folder of Markdown / text files (Obsidian-style vault, Noted's own export, plain files)
# ----------------------------------------------------------------------------------------

def markdown():
    base = "markdown/vault/"
    long_body = "\n\n".join(long_paragraphs(606, 25_000)) + "\n"
    files = []  # (relative path, bytes)
    exp = []

    def add(path, text, expected):
        data = text if isinstance(text, bytes) else text.encode("utf-8")
        files.append((path, data))
        if expected is not None:
            exp.append(expected)

    add("Inbox.md", "# Inbox zero ✉️\n\nThings to sort:\n\n- [ ] Reply to Ana\n- [x] Archive newsletters\n",
        note("markdown", "Inbox.md", "Inbox zero ✉️", "Things to sort:\n\n- [ ] Reply to Ana\n- [x] Archive newsletters\n"))
    add("shopping.txt", "milk\nbread\nコーヒー豆\n",
        note("markdown", "shopping.txt", "shopping", "milk\nbread\nコーヒー豆\n"))
    add("Work/Meeting 2024-01-05.md",
        "---\ntitle: \"Weekly sync: 2024-01-05\"\ntags:\n  - work\n  - meetings\ncreated: 2024-01-05T10:11:12.345Z\n"
        "updated: 2024-01-05T11:00:00Z\npinned: true\naliases: [sync]\n---\n\n## Notes\n\n- Shipped 1.4 🎉\n"
        "- Next: **pricing page**\n",
        note("markdown", "Work/Meeting 2024-01-05.md", "Weekly sync: 2024-01-05",
             "## Notes\n\n- Shipped 1.4 🎉\n- Next: **pricing page**\n", ["work", "meetings"], "Work", True, False,
             "2024-01-05T10:11:12.345Z", "2024-01-05T11:00:00.000Z"))
    add("Work/Projects/Alpha/Plan.md",
        "---\ntags: alpha, planning ,  Q1\ncreated: 2024-02-01T09:30:00+02:00\nupdated: 2024-02-03\n---\n"
        "# Alpha plan\n\nPhase 1 → prototype.\nPhase 2 → beta.\n",
        note("markdown", "Work/Projects/Alpha/Plan.md", "Alpha plan", "Phase 1 → prototype.\nPhase 2 → beta.\n",
             ["alpha", "planning", "Q1"], "Work/Projects/Alpha", False, False, "2024-02-01T07:30:00.000Z",
             "2024-02-03T00:00:00.000Z"))
    add("Work/Projects/Alpha/diagram.png", png(24, 16, 41), None)
    add("Personal/日記/2024-01-01.md", "新年の目標:\n\n- [ ] 毎日歩く 🚶\n- [ ] 本を24冊読む\n- [x] 日記を始める\n",
        note("markdown", "Personal/日記/2024-01-01.md", "2024-01-01",
             "新年の目標:\n\n- [ ] 毎日歩く 🚶\n- [ ] 本を24冊読む\n- [x] 日記を始める\n", [], "Personal/日記"))
    add("Personal/Long read.md",
        "---\ntitle: A very long read\ntags: [reading, \"long form\"]\ncreated: 2023-03-03T03:03:03Z\n"
        "updated: 2023-09-09T09:09:09.999Z\n---\n\n" + long_body,
        note("markdown", "Personal/Long read.md", "A very long read", long_body, ["reading", "long form"], "Personal",
             False, False, "2023-03-03T03:03:03.000Z", "2023-09-09T09:09:09.999Z"))
    add("Personal/Empty.md", "", note("markdown", "Personal/Empty.md", "Empty", "", [], "Personal"))
    add("Personal/Ideas.md", "Some loose thoughts first.\n\n# Section one\n\nThen a heading — not the title.\n",
        note("markdown", "Personal/Ideas.md", "Ideas",
             "Some loose thoughts first.\n\n# Section one\n\nThen a heading — not the title.\n", [], "Personal"))
    add("Personal/Quotes.md", "---\ntags: quotes\n---\n# Favourite quotes\n\n> Stay hungry, stay foolish.\n\n---\n\n"
                              "> 知之为知之，不知为不知。\n",
        note("markdown", "Personal/Quotes.md", "Favourite quotes",
             "> Stay hungry, stay foolish.\n\n---\n\n> 知之为知之，不知为不知。\n", ["quotes"], "Personal"))
    add("Home/Lists/Groceries 🛒.md",
        '---\ntitle: "Groceries 🛒"\ntags: ["home", "a \\"quoted\\" tag"]\nfolder: "Home/Lists"\npinned: true\n'
        'trashed: false\ncreated: 2026-11-25T18:49:29.123Z\nupdated: 2026-11-25T19:02:11.500Z\n'
        'id: 3fa8c1d2-6a0e-4d1b-9f8e-2c7b1e0d9a55\n---\n\n- [ ] milk\n- [x] eggs\n',
        note("markdown", "Home/Lists/Groceries 🛒.md", "Groceries 🛒", "- [ ] milk\n- [x] eggs\n",
             ["home", 'a "quoted" tag'], "Home/Lists", True, False, "2026-11-25T18:49:29.123Z",
             "2026-11-25T19:02:11.500Z"))
    add("Home/Old list.md",
        '---\ntitle: "Old list: 2023"\ntags: []\nfolder: "Home"\npinned: false\ntrashed: true\n'
        'created: 2023-01-01T00:00:00.000Z\nupdated: 2023-02-01T00:00:00.000Z\nid: 0badc0de-0000-4000-8000-000000000000\n'
        '---\n\nbatteries\n',
        note("markdown", "Home/Old list.md", "Old list: 2023", "batteries\n", [], "Home", False, True,
             "2023-01-01T00:00:00.000Z", "2023-02-01T00:00:00.000Z"))
    add(".obsidian/app.json", '{\n  "alwaysUpdateLinks": true,\n  "newFileLocation": "folder"\n}', None)
    add(".DS_Store", b"\x00\x00\x00\x01Bud1" + bytes(range(32)) * 2, None)
    for p, d in files:
        write(base + p, d)
    EXPECTED["markdown/vault"] = exp
    EXPECTED["markdown/markdown.zip"] = "markdown/vault"

    # markdown.zip as macOS Finder's "Compress" makes it: one top folder and __MACOSX AppleDouble files
    when = (2024, 3, 2, 11, 30, 0)
    entries = [("vault/", None, when, 3)]
    dirs = set()
    for p, d in sorted(files):
        if p == ".DS_Store":  # Finder leaves .DS_Store out of the archives it makes
            continue
        parts = p.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dname = "vault/" + "/".join(parts[:i]) + "/"
            if dname not in dirs:
                dirs.add(dname)
                entries.append((dname, None, when, 3))
        entries.append(("vault/" + p, d, when, 3))
    apple_double = b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + b"\x00" * 58
    entries += [("__MACOSX/", None, when, 3), ("__MACOSX/vault/", None, when, 3)]
    for p, d in sorted(files):
        if p.endswith(".md") and "/" not in p:
            entries.append(("__MACOSX/vault/._" + p, apple_double, when, 3))
    zip_bytes = make_zip(entries, streaming=True)
    write("markdown/markdown.zip", zip_bytes)

    # --- damaged or wrong files
    write("markdown/malformed-truncated.zip", zip_bytes[: len(zip_bytes) // 2])
    MALFORMED["markdown/malformed-truncated.zip"] = {
        "expect": "error", "why": "markdown.zip cut in half (an interrupted download)"}
    bad = "markdown/malformed-front-matter/"
    write(bad + "Unclosed.md", "---\ntitle: Never closed\ntags: [a, b]\n\nBody text after a front matter that never ends.\n")
    write(bad + "Broken yaml.md", "---\ntitle: \"An unclosed quote\ntags:\n- a\n  - b\n---\n\nThe text is fine.\n")
    write(bad + "Bad dates.md", "---\ntitle: Dates nobody can read\ncreated: 31/02/2024\nupdated: yesterday\n---\n\nStill a note.\n")
    write(bad + "Latin-1 notes.md", "Café crème, naïve façade. Größe: 5 µm. ¿Qué?\n".encode("latin-1"))
    MALFORMED["markdown/malformed-front-matter"] = {
        "expect": "partial",
        "why": "front matter that never closes (no front matter: the whole file is the body), front matter that is not "
               "valid YAML (ignored with a warning: the whole file is the body), unreadable dates (not asserted), a "
               "file in Latin-1 rather than UTF-8 (decoded as Windows-1252, with a warning)",
        "skipped": 0,
        "notes": [
            note("markdown", "Unclosed.md", "Unclosed",
                 "---\ntitle: Never closed\ntags: [a, b]\n\nBody text after a front matter that never ends.\n",
                 [], None),
            note("markdown", "Broken yaml.md", "Broken yaml",
                 "---\ntitle: \"An unclosed quote\ntags:\n- a\n  - b\n---\n\nThe text is fine.\n", [], None),
            note("markdown", "Bad dates.md", "Dates nobody can read", "Still a note.\n", [], None),
            note("markdown", "Latin-1 notes.md", "Latin-1 notes", "Café crème, naïve façade. Größe: 5 µm. ¿Qué?\n",
                 [], None),
        ]}


# ----------------------------------------------------------------------------------------

def main():
    if os.path.isdir(ROOT):
        for name in os.listdir(ROOT):
            if name in ("FORMATS.md",):
                continue
            p = os.path.join(ROOT, name)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    os.makedirs(ROOT, exist_ok=True)
    # Byte-exact fixtures: no end-of-line conversion by git (notes.json is CRLF on purpose).
    write(".gitattributes", "* -text\n")
    simplenote()
    evernote()
    keep()
    standardnotes()
    joplin()
    markdown()
    doc = {
        "about": "What a correct importer makes of each fixture. See FORMATS.md for the rules behind every value "
                 "(title/body split, ENML and Super-note conversion, tag paths, 'archived' tag, date choices).",
        "conventions": {
            "order": "notes are listed in the order the source holds them; match them by sourceID (or by index "
                     "when sourceID is null)",
            "tags": "compare as sets; listed in the order the source gives them",
            "dates": "ISO 8601 UTC with milliseconds; null means the fixture gives no usable date and the test "
                     "must not compare it (the importer uses its own fallback: file dates or the import time)",
            "folder": "slash-separated path, or null for none",
            "body": "exact, LF line endings, no trailing newline added or removed",
            "sameAs": "this fixture holds the same export in another container (zip, tar): expect exactly the "
                      "notes listed for the fixture named",
            "malformed.expect": "'error': the whole file is refused with a message, nothing imported; 'partial': "
                                "the listed notes are imported, 'skipped' notes are left out with a warning",
        },
        "fixtures": [({"path": p, "format": notes[0]["source"], "count": len(notes), "notes": notes}
                      if isinstance(notes, list) else
                      {"path": p, "format": EXPECTED[notes][0]["source"], "count": len(EXPECTED[notes]), "sameAs": notes})
                     for p, notes in EXPECTED.items()],
        "malformed": [dict(path=p, **m) for p, m in MALFORMED.items()],
    }
    write("EXPECTED.json", json.dumps(doc, ensure_ascii=False, indent=2) + "\n")


if __name__ == "__main__":
    main()

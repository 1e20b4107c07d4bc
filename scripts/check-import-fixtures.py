#!/usr/bin/env python3
"""A reference importer in Python for the fixtures in Tests/NotedPortingTests/Fixtures: reads
every fixture the way FORMATS.md says an importer should (from the files alone, never from the
generator's data) and compares what it gets with EXPECTED.json. Exits non-zero on a mismatch.

It is a cross-check of the fixtures and of EXPECTED.json, not Noted's importer.

    python3 scripts/check-import-fixtures.py
"""

import importlib.util
import json
import os
import re
import sys
import tarfile
import zipfile
from datetime import datetime, timezone
from xml.etree import ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "Tests", "NotedPortingTests", "Fixtures"))
spec = importlib.util.spec_from_file_location("gen", os.path.join(HERE, "make-import-fixtures.py"))
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)  # for enml_to_markdown and lexical_to_markdown: the documented rules

UTC = timezone.utc


class Refused(Exception):
    pass


def iso(d):
    if d is None:
        return None
    d = d.astimezone(UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (d.microsecond // 1000)


def parse_iso(s):
    """ISO 8601 with Z or an offset, optional fraction; a bare date is midnight UTC."""
    if not isinstance(s, str):
        return None
    s = s.strip()
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)", s)
    try:
        if m:
            return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
        m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)", s)
        if not m:
            return None
        frac = int((m[7] or "0")[:6].ljust(6, "0"))
        d = datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]), frac, tzinfo=UTC)
        if m[8] != "Z":
            sign = 1 if m[8][0] == "+" else -1
            hh, mm = int(m[8][1:3]), int(m[8][-2:])
            from datetime import timedelta
            d = d - sign * timedelta(hours=hh, minutes=mm)
        return d
    except ValueError:
        return None


def mk(source, sid, title, body, tags, folder, pinned, trashed, created, updated):
    return dict(source=source, sourceID=sid, title=title, body=body, tags=tags, folder=folder, pinned=pinned,
                trashed=trashed, created=iso(created), updated=iso(updated))


# ---- containers: a folder, a zip (one common top folder and __MACOSX dropped), a tar

def read_folder(path):
    files = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for f in filenames:
            full = os.path.join(dirpath, f)
            files[os.path.relpath(full, path).replace(os.sep, "/")] = open(full, "rb").read()
    return files


def read_zip(path):
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise Refused("not a readable zip: %s" % e)
    files = {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}
    files = {k: v for k, v in files.items() if not k.startswith("__MACOSX/")}
    tops = {k.split("/")[0] for k in files}
    if len(tops) == 1 and all("/" in k for k in files):
        top = tops.pop() + "/"
        if top not in ("Takeout/", "source/", "Items/"):
            files = {k[len(top):]: v for k, v in files.items()}
    return files


def read_tar(path):
    try:
        with tarfile.open(path, "r:") as t:
            return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    except (tarfile.TarError, EOFError) as e:
        raise Refused("not a readable tar: %s" % e)


def visible(files):
    return {k: v for k, v in files.items() if not any(p.startswith(".") for p in k.split("/"))}


def load_json(data):
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Refused("not JSON: %s" % e)


# ---- Simplenote

def simplenote(files):
    key = next((k for k in files if k == "source/notes.json" or k.endswith("/source/notes.json")), None)
    doc = load_json(files[key]) if key else None
    if not isinstance(doc, dict) or not isinstance(doc.get("activeNotes"), list):
        raise Refused("not a Simplenote export")
    out, skipped = [], 0
    for n, trashed in [(n, False) for n in doc["activeNotes"]] + [(n, True) for n in doc.get("trashedNotes") or []]:
        if not isinstance(n.get("content"), str):
            skipped += 1
            continue
        title, body = gen.simplenote_title_body(n["content"])
        tags = n.get("tags") if isinstance(n.get("tags"), list) else []
        out.append(mk("simplenote", n.get("id"), title, body, tags, None, n.get("pinned") is True, trashed,
                      parse_iso(n.get("creationDate")), parse_iso(n.get("lastModified"))))
    return out, skipped


def simplenote_file(path):
    if path.endswith(".zip"):
        return simplenote(read_zip(path))
    if os.path.isdir(path):
        return simplenote(read_folder(path))
    return simplenote({"source/notes.json": open(path, "rb").read()})


# ---- Evernote

def evernote(path):
    data = open(path, "rb").read()
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise Refused("not XML: %s" % e)
    if root.tag != "en-export":
        raise Refused("root is <%s>, not <en-export>" % root.tag)
    notebook = os.path.splitext(os.path.basename(path))[0]
    out, skipped = [], 0
    for i, n in enumerate(root.findall("note")):
        content = n.findtext("content")
        if content is None:
            skipped += 1
            continue
        files = {}
        for r in n.findall("resource"):
            import base64
            import hashlib
            raw = base64.b64decode("".join((r.findtext("data") or "").split()))
            files[hashlib.md5(raw).hexdigest()] = r.findtext("resource-attributes/file-name") or r.findtext("mime")

        def d(tag):
            s = n.findtext(tag)
            try:
                return datetime.strptime(s, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC) if s else None
            except ValueError:
                return None

        out.append(mk("evernote", "%s:%d" % (os.path.basename(path), i + 1), n.findtext("title") or "",
                      gen.enml_to_markdown(content, files), [t.text for t in n.findall("tag")], notebook, False, False,
                      d("created"), d("updated")))
    return out, skipped


# ---- Google Keep

def keep_note(name, data):
    n = load_json(data)
    if not isinstance(n, dict) or not ("textContent" in n or "listContent" in n or "userEditedTimestampUsec" in n
                                       or "isTrashed" in n):
        raise Refused("not a Keep note")
    if isinstance(n.get("listContent"), list):
        body = "\n".join(("- [x] " if i.get("isChecked") else "- [ ] ") + i.get("text", "") for i in n["listContent"])
    else:
        body = n.get("textContent") or ""
    for a in n.get("attachments") or []:
        body = (body + "\n\n" if body else "") + "[attachment skipped: %s]" % a["filePath"]
    tags = [l["name"] for l in n.get("labels") or []] + (["archived"] if n.get("isArchived") else [])

    def t(v):
        return datetime.fromtimestamp(v // 1_000_000, UTC).replace(microsecond=v % 1_000_000) if isinstance(v, int) else None

    edited = t(n.get("userEditedTimestampUsec"))
    created = t(n.get("createdTimestampUsec")) or edited
    return mk("keep", name, n.get("title") or "", body, tags, None, n.get("isPinned") is True,
              n.get("isTrashed") is True, created, edited)


def keep(path):
    if path.endswith(".json"):
        return [keep_note(os.path.splitext(os.path.basename(path))[0], open(path, "rb").read())], 0
    files = read_zip(path) if path.endswith(".zip") else {"Takeout/" + k: v for k, v in read_folder(path).items()}
    out = []
    for k in files:
        m = re.fullmatch(r"Takeout/Keep/(.+)\.json", k)
        if m:
            out.append(keep_note(m[1], files[k]))
    return out, 0


# ---- Standard Notes

def standardnotes(path):
    if path.endswith(".zip"):
        files = read_zip(path)
        data = files.get("Standard Notes Backup and Import File.txt")
        if data is None:
            raise Refused("no backup file in the zip")
    else:
        data = open(path, "rb").read()
    doc = load_json(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise Refused("not a Standard Notes backup")
    if "keyParams" in doc or "auth_params" in doc:
        raise Refused("an encrypted backup: download a decrypted one")
    items = {i.get("uuid"): i for i in doc["items"] if isinstance(i, dict)}
    tags = {u: i for u, i in items.items() if i.get("content_type") == "Tag" and isinstance(i.get("content"), dict)}

    def tag_path(u, seen=()):
        c = tags[u]["content"]
        parent = next((r["uuid"] for r in c.get("references", []) if r.get("reference_type") == "TagToParentTag"
                       and r["uuid"] in tags and r["uuid"] not in seen), None)
        return (tag_path(parent, seen + (u,)) + "/" if parent else "") + c.get("title", "")

    note_tags = {}
    for u, t in tags.items():
        for r in t["content"].get("references", []):
            if r.get("content_type") == "Note" and not r.get("reference_type"):
                note_tags.setdefault(r["uuid"], []).append(tag_path(u))
    out, skipped = [], 0
    for i in doc["items"]:
        if i.get("content_type") != "Note":
            continue
        c = i.get("content")
        if not isinstance(c, dict):
            skipped += 1
            continue
        sn = (c.get("appData") or {}).get("org.standardnotes.sn") or {}
        text = c.get("text") or ""
        if c.get("noteType") == "super" and text:
            text = gen.lexical_to_markdown(json.loads(text))
        tags_ = [t for t in tags_order(doc, i["uuid"], note_tags)]
        if sn.get("archived") is True or c.get("archived") is True:
            tags_.append("archived")
        updated = parse_iso(sn.get("client_updated_at")) or parse_iso(i.get("updated_at"))
        created = parse_iso(i.get("created_at"))
        if created is None:
            updated = None
        out.append(mk("standardnotes", i.get("uuid"), c.get("title") or "", text, tags_, None,
                      sn.get("pinned") is True or c.get("pinned") is True, c.get("trashed") is True, created, updated))
    return out, skipped


def tags_order(doc, uuid, note_tags):
    return list(note_tags.get(uuid, []))


# ---- Joplin

def joplin_items(files):
    items, skipped = [], 0
    for name, data in files.items():
        if not re.fullmatch(r"[0-9a-f]{32}\.md", name):
            continue
        lines = data.decode("utf-8").split("\n")
        props, i = {}, len(lines) - 1
        ok = True
        while i >= 0:
            line = lines[i].strip()
            if line == "":
                break
            if ":" not in line:
                ok = False
                break
            k, v = line.split(":", 1)
            props[k.strip()] = v.strip()
            i -= 1
        if not ok or "type_" not in props:
            skipped += 1
            continue
        head = lines[:i]
        if head:
            props["title"] = head[0]
            props["body"] = "\n".join(head[2:])
        items.append(props)
    return items, skipped


def joplin(path):
    files = read_tar(path) if path.endswith(".jex") else read_folder(path)
    items, skipped = joplin_items(files)
    folders = {i["id"]: i for i in items if i["type_"] == "2"}
    tags = {i["id"]: i["title"] for i in items if i["type_"] == "5"}
    links = {}
    for i in items:
        if i["type_"] == "6" and i.get("tag_id") in tags:
            links.setdefault(i["note_id"], []).append(tags[i["tag_id"]])

    def folder_path(fid):
        parts = []
        while fid in folders and len(parts) < 100:
            parts.insert(0, folders[fid]["title"])
            fid = folders[fid].get("parent_id")
        return "/".join(parts) or None

    out = []
    for i in sorted((i for i in items if i["type_"] == "1"), key=lambda i: int(i.get("order") or 0) or 0):
        c = parse_iso(i.get("user_created_time")) or parse_iso(i.get("created_time"))
        u = parse_iso(i.get("user_updated_time")) or parse_iso(i.get("updated_time"))
        out.append(mk("joplin", i["id"], i.get("title", ""), i.get("body", ""), links.get(i["id"], []),
                      folder_path(i.get("parent_id")), False, int(i.get("deleted_time") or 0) > 0, c, u))
    return out, skipped


# ---- Markdown folder

def markdown(path):
    files = read_zip(path) if path.endswith(".zip") else read_folder(path)
    import yaml
    out = []
    for rel in sorted(visible(files)):
        if not rel.endswith((".md", ".markdown", ".txt")):
            continue
        raw = files[rel]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("cp1252")
        text = text.replace("\r\n", "\n")
        stem = os.path.splitext(os.path.basename(rel))[0]
        folder = os.path.dirname(rel) or None
        meta, body = {}, text
        if rel.endswith((".md", ".markdown")) and text.startswith("---\n"):
            end = text.find("\n---\n", 3)
            if end >= 0:
                try:
                    meta = yaml.safe_load(text[4:end + 1]) or {}
                    body = text[end + 5:].lstrip("\n")
                except yaml.YAMLError:
                    meta = {}
                if not isinstance(meta, dict):
                    meta, body = {}, text
        title = meta.get("title")
        if title is None:
            title = stem
            if rel.endswith((".md", ".markdown")):
                m = re.match(r"# (.+)\n?", body)
                if m:
                    title = m[1].strip()
                    body = body[m.end():].lstrip("\n")
        tags = meta.get("tags") or []
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split(",") if t.strip()]

        def d(v):
            if isinstance(v, datetime):
                return v if v.tzinfo else v.replace(tzinfo=UTC)
            if hasattr(v, "year") and not isinstance(v, str):
                return datetime(v.year, v.month, v.day, tzinfo=UTC)
            return parse_iso(v) if isinstance(v, str) else None

        out.append(mk("markdown", rel, str(title), body, [str(t) for t in tags], meta.get("folder") or folder,
                      meta.get("pinned") is True, meta.get("trashed") is True, d(meta.get("created")),
                      d(meta.get("updated"))))
    return out, 0


READERS = {"simplenote": simplenote_file, "evernote": evernote, "keep": keep, "standardnotes": standardnotes,
           "joplin": joplin, "markdown": markdown}


def main():
    expected = json.load(open(os.path.join(ROOT, "EXPECTED.json"), encoding="utf-8"))
    by_path = {f["path"]: f for f in expected["fixtures"]}
    failures = 0

    def compare(label, got, want):
        nonlocal failures
        if len(got) != len(want):
            print("FAIL %s: %d notes, expected %d" % (label, len(got), len(want)))
            failures += 1
            return
        key = lambda n: n["sourceID"] or n["title"]
        got_by = {key(n): n for n in got}
        for w in want:
            g = got_by.get(key(w))
            if g is None:
                print("FAIL %s: no note %r" % (label, key(w)))
                failures += 1
                continue
            for field in w:
                a, b = g[field], w[field]
                if field == "tags":
                    a, b = sorted(a), sorted(b)
                if w[field] is None and field in ("created", "updated"):
                    continue
                if a != b:
                    print("FAIL %s %r %s:\n  got      %r\n  expected %r" % (label, key(w), field, str(a)[:300], str(b)[:300]))
                    failures += 1

    for f in expected["fixtures"]:
        want = by_path[f["sameAs"]]["notes"] if "sameAs" in f else f["notes"]
        got, skipped = READERS[f["format"]](os.path.join(ROOT, f["path"]))
        compare(f["path"], got, want)
        print("ok   %s (%d notes)" % (f["path"], len(got)) if not failures else "...  %s" % f["path"])
    for m in expected["malformed"]:
        fmt = m["path"].split("/")[0]
        try:
            got, skipped = READERS[fmt](os.path.join(ROOT, m["path"]))
        except Refused as e:
            if m["expect"] == "error":
                print("ok   %s refused: %s" % (m["path"], str(e)[:80]))
            else:
                print("FAIL %s refused (%s), expected partial" % (m["path"], e))
                failures += 1
            continue
        if m["expect"] == "error":
            print("FAIL %s was read (%d notes), expected an error" % (m["path"], len(got)))
            failures += 1
            continue
        compare(m["path"], got, m["notes"])
        if skipped != m["skipped"]:
            print("FAIL %s skipped %d, expected %d" % (m["path"], skipped, m["skipped"]))
            failures += 1
        else:
            print("ok   %s (%d notes, %d skipped)" % (m["path"], len(got), skipped))
    print("%d failure(s)" % failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""Seeds an account with many notes over the HTTP API (docs/protocol.md sections 6 and 7):
one first-party sign-in, then `POST /v1/push` with `maxChangesPerPush` creates per request, a
few requests at a time. Used by the browser tests (Tests/peers/test_webapp.py) and by
scripts/bench-web. The server should run with a high `--max-pushes-per-second` (the default,
20 per second, makes 100,000 notes take over a minute)."""
import concurrent.futures
import random
import uuid

import requests

# A made-up vocabulary with a skewed use, like the words of real notes: a few very common
# ones, a long tail of rare ones.
_SYLLABLES = ["ka", "to", "ri", "ne", "mo", "la", "su", "pe", "di", "vo", "ba", "ze", "qui", "stra", "en", "or", "al", "um"]


def _vocabulary(rng, size=4000):
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def note_text(i, size, rng, vocabulary):
    """The title and body of note number `i`: 'Note i' and about `size` characters of words,
    with `marker{i}` as its first word so that a search finds exactly this note."""
    words = [f"marker{i}"]
    length = len(words[0])
    while length < size:
        w = vocabulary[int(len(vocabulary) * rng.random() ** 3)]
        words.append(w)
        length += len(w) + 1
    body = " ".join(words)[:size]
    return f"Note {i}", body


def sign_in(base, username, password):
    r = requests.post(base + "/v1/sessions", json={"username": username, "password": password, "device": str(uuid.uuid4())})
    r.raise_for_status()
    return r.json()["access_token"]


def seed(base, username, password, count, size=2000, seed=1, threads=3, batch=100):
    """Creates `count` notes of about `size` characters; returns their ids in creation order."""
    token = sign_in(base, username, password)
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    notes = []
    for i in range(count):
        title, body = note_text(i, size, rng, vocabulary)
        notes.append((str(uuid.uuid4()), title, body))
    session = requests.Session()
    session.headers["Authorization"] = "Bearer " + token

    def push(start):
        changes = [{"ccid": str(uuid.uuid4()), "collection": "notes", "id": nid, "baseRev": 0, "op": "upsert",
                    "fields": {"title": {"set": title}, "body": {"set": body}}}
                   for nid, title, body in notes[start:start + batch]]
        r = session.post(base + "/v1/push", json={"changes": changes}, timeout=120)
        r.raise_for_status()
        bad = [x for x in r.json()["results"] if x.get("type") != "ack"]
        assert not bad, bad[:3]

    # In order of creation: batches in sequence per thread, threads interleaved.
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(push, range(0, count, batch)))
    return [nid for nid, _, _ in notes]

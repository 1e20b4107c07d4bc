"""The examples of README.md and docs/*.md, run as a newcomer would run them (issue 47).

Every command line in a fenced shell block (```sh, bash, shell, console) that runs `curl`,
`noted` or `noted-server` (at the start of the line after an optional `$ ` prompt, or after a
pipe or in a `$(…)`; continued across trailing backslashes) is run, in document order, file by
file, against a fresh real server (`--port 0`, its data in the default `./.noted-server` of the
working directory the lines run in) with a fresh `HOME` (so `~/laptop` and the default `noted`
home are new). The block's `export NAME=…` lines are run too, as the context the next lines
need. The lines run in bash (with `pipefail`); shell variables they set (`id=$(noted new …)`)
carry over to the next lines of the file.

A line passes when it exits 0. `curl` runs with `--fail-with-body -S` added, so an HTTP 4xx or
5xx answer fails the line. A line ending in `&` must still be running (or have exited 0) two
seconds later; it is stopped at the end of its file. A line that starts a server (`noted-server`
without a subcommand) is started with `--port 0` and a fresh `--data` and must print
"noted-server listening on …"; one ending in `&` keeps serving, and the port the line names
(8080 by default) means it from then on; one without is then stopped and must exit 0.

What the docs leave to the reader is filled in: a host:port the docs name means the server
of the test (`localhost:8080` and `127.0.0.1:8080` the file's server until a line starts one in
the background), `$ACCESS_TOKEN` is the token of the last answer that carried one, the paths
and accounts a page presupposes are made before its lines run (SETUP), and the paths in
SUBSTITUTIONS are made temporary.

Lines that cannot run here are in SKIP, keyed by the exact line, with the reason;
a skip-listed line that is no longer in the docs fails the test, so the list stays honest.
Where the docs say what a line prints, EXPECT checks it.

Run by scripts/test; NOTED_SERVER_BIN and NOTED_BIN name the executables.
"""
import glob
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER_BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))
CLI_BIN = os.environ.get("NOTED_BIN", os.path.join(ROOT, ".build/debug/noted"))
FIXTURES = os.path.join(ROOT, "Tests/NotedPortingTests/Fixtures")
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
LINE_TIMEOUT = 90

# (file, exact line as extracted: prompt dropped, continuations joined by one space) → why it
# cannot run here.
SKIP = {
    ("docs/deploy.md", "noted-server --host 127.0.0.1 --port 8081 --trusted-proxy 127.0.0.1 "
                       "--database postgres://noted@db.internal:5432/noted --issuer https://notes.example.org"):
        "needs the PostgreSQL server db.internal (Tests/peers/test_deploy.py runs these nodes on a local PostgreSQL)",
    ("docs/deploy.md", "noted-server --host 127.0.0.1 --port 8082 --trusted-proxy 127.0.0.1 "
                       "--database postgres://noted@db.internal:5432/noted --issuer https://notes.example.org"):
        "needs the PostgreSQL server db.internal (Tests/peers/test_deploy.py runs these nodes on a local PostgreSQL)",
    ("docs/deploy.md", "noted-server --config /etc/noted/noted.json --port 8081"):
        "its config file (written by the block's `cat`, /etc) names the PostgreSQL server db.internal",
    ("docs/deploy.md", "noted-server --config /etc/noted/noted.json --port 8082"):
        "its config file (written by the block's `cat`, /etc) names the PostgreSQL server db.internal",
    ("docs/deploy.md", "noted login --server https://notes.example.org"):
        "browser sign-in: waits for a browser to come back through OAuth",
    ("docs/deploy.md", "noted sync"):
        "needs the browser sign-in of the line before",
}

# What a line must print, where the docs say (in its comment or around it): regular expressions.
EXPECT = {
    ("README.md", "noted --home ~/phone list                                      # 3fa8c1d2    Groceries  #home"):
        [r"(?m)^[0-9a-f]{8}\s+Groceries\s+#home$"],
    # "Offline on both, then sync: non-overlapping edits both survive."
    ("README.md", "noted --home ~/phone show ${id:0:6} --json"):
        [r'"body":"milk\\neggs"', r'"title":"Groceries \(Sat\)"'],
}

# Paths the docs name that a test may not touch, or that name the reader's deployment.
# {base}: the file's server; {sandbox}: the file's temporary directory; {data}: the file's
# server's data directory.
SUBSTITUTIONS = [
    ("https://notes.example.org", "{base}"),   # docs/deploy.md: "your" public URL
    ("/var/backups/", "{sandbox}/var/backups/"),
    ("/srv/noted", "{data}"),
]

PASSWORD = "correct horse battery"


def setup_deploy(ctx):
    """docs/deploy.md's account commands act on a user alice, who has signed up."""
    answer = requests.post(ctx.base + "/v1/accounts", json={"username": "alice", "password": PASSWORD}, timeout=30)
    assert answer.status_code == 201, answer.text


def setup_import_export(ctx):
    """docs/import-export.md's reader uses `noted` signed in, with a note (`--with-history`
    asks the server), and has the exports the import lines name."""
    for command in (["register", "--username", "reader", "--password-stdin"],
                    ["new", "--title", "Groceries", "--body", "milk", "--tag", "home"]):
        done = subprocess.run([CLI_BIN, "--server", ctx.base, *command], input=PASSWORD + "\n", env=ctx.env,
                              cwd=ctx.work, capture_output=True, text=True, timeout=LINE_TIMEOUT)
        assert done.returncode == 0, done.stderr
    os.makedirs(os.path.join(ctx.home, "Downloads"))
    shutil.copy(os.path.join(FIXTURES, "markdown/markdown.zip"), os.path.join(ctx.home, "Downloads/notes.zip"))
    shutil.copy(os.path.join(FIXTURES, "evernote/Work Notes.enex"), os.path.join(ctx.home, "Work Notes.enex"))
    shutil.copytree(os.path.join(FIXTURES, "keep/Takeout"), os.path.join(ctx.home, "Takeout"))


SETUP = {"docs/deploy.md": setup_deploy, "docs/import-export.md": setup_import_export}


# --- Extraction -----------------------------------------------------------------------------

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
COMMAND = re.compile(r"(?:^|[|;&(]\s*)(noted-server|noted|curl)(?=[\s)]|$)")
CONTEXT = re.compile(r"^export\s+[A-Za-z_]\w*=")
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)")


def doc_files():
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs/*.md")))


def extract(relpath):
    """[(line number, text, kind)] of a file: kind "example" (a curl/noted/noted-server line)
    or "context" (an `export NAME=…` line of the same blocks)."""
    with open(os.path.join(ROOT, relpath), encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    fence = None
    language = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if fence is None and m:
            fence, language = m.group(1), m.group(2).lower()
            i += 1
            continue
        if fence is not None and line.strip().startswith(fence[:3]) and line.strip().strip(fence[0]) == "":
            fence = None
            i += 1
            continue
        if fence is None or language not in SHELL_LANGUAGES:
            i += 1
            continue
        start = i
        text = line.strip()
        if text.startswith("$ "):
            text = text[2:].strip()
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        heredoc = HEREDOC.search(text)
        if heredoc:  # its body is not commands
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                i += 1
            i += 1
        if not text or text.startswith("#"):
            continue
        if COMMAND.search(text):
            found.append((start + 1, text, "example"))
        elif CONTEXT.match(text):
            found.append((start + 1, text, "context"))
    return found


EXAMPLES = {path: extract(path) for path in doc_files()}
FILES_WITH_EXAMPLES = [path for path, found in EXAMPLES.items() if any(kind == "example" for _, _, kind in found)]


# --- Running --------------------------------------------------------------------------------

class Sandbox:
    def __init__(self, relpath):
        self.relpath = relpath
        self.root = tempfile.mkdtemp(prefix="noted-doc-examples-")
        self.home = os.path.join(self.root, "home")
        self.work = os.path.join(self.root, "work")
        self.bin = os.path.join(self.root, "bin")
        self.data = os.path.join(self.work, ".noted-server")
        self.state = os.path.join(self.root, "shell-state.sh")
        for d in (self.home, self.work, self.bin, os.path.join(self.root, "var/backups")):
            os.makedirs(d)
        open(self.state, "w").close()
        os.symlink(os.path.abspath(CLI_BIN), os.path.join(self.bin, "noted"))
        os.symlink(os.path.abspath(SERVER_BIN), os.path.join(self.bin, "noted-server"))
        curl = shutil.which("curl")
        with open(os.path.join(self.bin, "curl"), "w") as f:
            # An HTTP error answer fails the line, and shows why (a line with its own -f keeps it).
            f.write('#!/bin/sh\nfail=--fail-with-body\n'
                    'for a in "$@"; do case "$a" in --fail|--fail-with-body|-f*|-[!-]*f*) fail= ;; esac; done\n'
                    f'exec {shlex.quote(curl)} $fail -S "$@"\n')
        os.chmod(os.path.join(self.bin, "curl"), 0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NOTED_") and k != "XDG_DATA_HOME"}
        self.env.update(HOME=self.home, PATH=self.bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"))
        self.processes = []   # (Popen, what) of servers and background lines, stopped at the end
        self.servers = 0
        self.ports = {}       # a port the docs name → the real one
        self.base = None
        # Variables the lines set, carried from line to line.
        self.variables = {"ACCESS_TOKEN"}
        for _, text, _ in EXAMPLES[relpath]:
            for m in re.finditer(r"(?:^|[\s;&|(])(?:export\s+)?([A-Za-z_]\w*)=", text):
                self.variables.add(m.group(1))

    def start(self):
        """The file's server, in the default data directory of the lines' working directory."""
        _, port = self.start_server([SERVER_BIN, "--port", "0", "--data", self.data, "--log-level", "error"], "the file's server")
        self.base = f"http://127.0.0.1:{port}"
        self.ports[8080] = port

    def start_server(self, argv, what):
        log = open(os.path.join(self.root, f"server-{self.servers}.log"), "w")
        self.servers += 1
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True,
                                cwd=self.work, env=self.env, start_new_session=True)
        self.processes.append((proc, what))
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        m = re.match(r"noted-server listening on http://[^:]+:(\d+)", line)
        if not m:
            log.flush()
            raise AssertionError(f"{what}: no 'noted-server listening on' line (got {line!r}); "
                                 f"log: {open(log.name).read()[-2000:]}")
        return proc, int(m.group(1))

    def substitute(self, text):
        for named, real in self.ports.items():
            text = re.sub(rf"\b(localhost|127\.0\.0\.1):{named}(?!\d)", rf"\g<1>:{real}", text)
        for old, new in SUBSTITUTIONS:
            text = text.replace(old, new.format(base=self.base, sandbox=self.root, data=self.data))
        return text

    def close(self):
        for proc, _ in reversed(self.processes):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def shell_words(text):
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return []


def run_server_line(box, text, where):
    """A `noted-server` line without a subcommand: it must start and listen."""
    words = shell_words(box.substitute(text))
    background = words[-1] == "&"
    if background:
        words = words[:-1]
    named_port = 8080
    argv = [SERVER_BIN]
    i = 1
    data_given = False
    while i < len(words):
        word = words[i]
        if word in ("--port", "--data") and i + 1 < len(words):
            if word == "--port":
                named_port = int(words[i + 1])
                argv += ["--port", "0"]
            else:
                data_given = True
                argv += ["--data", os.path.join(box.root, f"server-data-{box.servers}")]
            i += 2
            continue
        argv.append(word)
        i += 1
    if "--port" not in argv:
        argv += ["--port", "0"]
    if not data_given:  # not the file's server's ./.noted-server
        argv += ["--data", os.path.join(box.root, f"server-data-{box.servers}")]
    proc, port = box.start_server(argv, where)
    if background:
        box.ports[named_port] = port
        return
    proc.terminate()
    code = proc.wait(timeout=30)
    assert code == 0, f"{where}: the server exited {code} on SIGTERM"


def run_background_line(box, text, where):
    script = f"source {shlex.quote(box.state)}\n" + re.sub(r"&\s*(#.*)?$", "", box.substitute(text))
    log = os.path.join(box.root, f"background-{len(box.processes)}.log")
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", script], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=box.work, env=box.env, start_new_session=True)
    box.processes.append((proc, where))
    time.sleep(2)
    code = proc.poll()
    assert code in (None, 0), f"{where}: exited {code}: {open(log).read()[-2000:]}"


def run_line(box, text, where):
    command = box.substitute(text)
    script = (f"set -o pipefail\nsource {shlex.quote(box.state)}\n{command}\n__rc=$?\n"
              f"declare -p {' '.join(sorted(box.variables))} > {shlex.quote(box.state)} 2>/dev/null\nexit $__rc\n")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", script], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=box.work, env=box.env, timeout=LINE_TIMEOUT)
    assert done.returncode == 0, (f"{where}: exit {done.returncode}\n  ran: {command}\n"
                                  f"  stdout: {done.stdout[-2000:]}\n  stderr: {done.stderr[-2000:]}")
    for pattern in EXPECT.get((box.relpath, text), []):
        assert re.search(pattern, done.stdout), f"{where}: the output does not match {pattern!r}:\n{done.stdout[-2000:]}"
    token = re.search(r'"access_token"\s*:\s*"([A-Za-z0-9._~+/=-]+)"', done.stdout)
    if token:
        with open(box.state, "a") as f:
            f.write(f"ACCESS_TOKEN={shlex.quote(token.group(1))}\n")


# --- Tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("relpath", FILES_WITH_EXAMPLES)
def test_the_examples_of_a_page_run(relpath, capsys):
    if shutil.which("curl") is None:
        print("NOTICE: curl not found: the documentation's examples are not run")
        pytest.skip("curl is missing")
    box = Sandbox(relpath)
    ran = skipped = context = 0
    failed = ""
    try:
        box.start()
        if relpath in SETUP:
            SETUP[relpath](box)
        for number, text, kind in EXAMPLES[relpath]:
            where = f"{relpath}:{number}: {text}"
            if (relpath, text) in SKIP:
                skipped += 1
                continue
            failed = f" before failing at line {number}"
            words = shell_words(text)
            if words[:1] == ["noted-server"] and (len(words) == 1 or words[1].startswith("-") or words[1] == "&"):
                run_server_line(box, text, where)
            elif words[-1:] == ["&"]:
                run_background_line(box, text, where)
            else:
                run_line(box, text, where)
            failed = ""
            if kind == "example":
                ran += 1
            else:
                context += 1
    finally:
        box.close()
        with capsys.disabled():
            print(f"\n{relpath}: {ran} example line(s) run{failed}, {skipped} skipped ({context} context line(s) run)")


def test_the_skip_list_names_only_lines_of_the_docs(capsys):
    present = {(path, text) for path, found in EXAMPLES.items() for _, text, kind in found}
    stale = [key for key in SKIP if key not in present]
    assert not stale, f"skip-listed lines no longer in the docs (remove them from SKIP): {stale}"
    stale = [key for key in EXPECT if key not in present or key in SKIP]
    assert not stale, f"EXPECT names lines that are not run (update EXPECT): {stale}"
    assert all(reason.strip() for reason in SKIP.values())
    total = sum(kind == "example" for found in EXAMPLES.values() for _, _, kind in found)
    with capsys.disabled():
        print(f"\ndocumentation examples: {total} line(s) in {len(FILES_WITH_EXAMPLES)} file(s), "
              f"{total - len(SKIP)} run, {len(SKIP)} skipped")


def test_the_extraction_finds_the_readme_examples():
    texts = [text for _, text, kind in EXAMPLES["README.md"] if kind == "example"]
    assert any(t.startswith("curl ") for t in texts), texts
    assert any(t.startswith("noted ") for t in texts), texts
    assert any(t.startswith("echo ") and "| noted " in t for t in texts), texts
    assert any(t.startswith("id=$(noted ") for t in texts), texts
    # Not a shell block's line: the Swift, JSON and diagram blocks give nothing.
    assert all(kind != "example" for _, _, kind in EXAMPLES["docs/architecture.md"])

"""docs/deploy.md's worked example, run for real: nginx from Debian with the very config file of
the docs (docs/deploy/nginx-noted.conf; only ports and the listen line rewritten), in front of
two noted-server nodes sharing one PostgreSQL database.

Needs nginx, NOTED_TEST_POSTGRES_URL (scripts/test starts a throwaway cluster) and psql; each
missing piece skips the test with a printed notice.
"""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import pytest
import requests
from websockets.sync.client import connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))
CONFIG = os.path.join(ROOT, "docs/deploy/nginx-noted.conf")
PG_URL = os.environ.get("NOTED_TEST_POSTGRES_URL")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def skip_with_notice(why):
    print(f"NOTICE: test_deploy skipped: {why}")
    pytest.skip(why)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (requests.RequestException, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout} s")


@pytest.fixture(scope="module")
def cluster():
    if not NGINX:
        skip_with_notice("nginx is not installed (apt-get install nginx)")
    if not PG_URL:
        skip_with_notice("NOTED_TEST_POSTGRES_URL is not set")
    if not shutil.which("psql"):
        skip_with_notice("psql is not installed")
    name = "noted_deploy_" + secrets.token_hex(4)
    subprocess.run(["psql", PG_URL, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
    parts = urllib.parse.urlsplit(PG_URL)
    database = urllib.parse.urlunsplit(parts._replace(path="/" + name))
    work = tempfile.mkdtemp(prefix="noted-deploy-")
    proxy_port = free_port()
    issuer = f"http://127.0.0.1:{proxy_port}"
    processes = []
    try:
        node_ports = []
        for index in range(2):
            proc = subprocess.Popen(
                [BIN, "--port", "0", "--database", database, "--issuer", issuer, "--trusted-proxy", "127.0.0.1",
                 "--data", os.path.join(work, f"node{index}")],
                stdout=subprocess.PIPE, stderr=open(os.path.join(work, f"node{index}.log"), "w"), text=True)
            processes.append(proc)
            line = proc.stdout.readline()
            m = re.match(r"noted-server listening on http://127\.0\.0\.1:(\d+)", line)
            assert m, f"unexpected first line {line!r}"
            node_ports.append(int(m.group(1)))

        site = open(CONFIG).read()
        site = site.replace("server 127.0.0.1:8081", f"server 127.0.0.1:{node_ports[0]}")
        site = site.replace("server 127.0.0.1:8082", f"server 127.0.0.1:{node_ports[1]}")
        site = re.sub(r"listen 80;", f"listen 127.0.0.1:{proxy_port};", site)
        assert str(node_ports[0]) in site and str(node_ports[1]) in site and str(proxy_port) in site
        with open(os.path.join(work, "noted.conf"), "w") as f:
            f.write(site)
        with open(os.path.join(work, "nginx.conf"), "w") as f:
            f.write(f"""
daemon off;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    include {work}/noted.conf;
}}
""")
        test = subprocess.run([NGINX, "-t", "-p", work, "-c", os.path.join(work, "nginx.conf")], capture_output=True, text=True)
        assert test.returncode == 0, test.stderr
        nginx = subprocess.Popen([NGINX, "-p", work, "-c", os.path.join(work, "nginx.conf")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(nginx)
        base = f"http://127.0.0.1:{proxy_port}"
        wait_until(lambda: requests.get(base + "/health", timeout=2).status_code == 200, 15, "nginx answers /health")
        yield {"base": base, "nodes": [f"http://127.0.0.1:{p}" for p in node_ports], "issuer": issuer}
    finally:
        for proc in reversed(processes):
            proc.terminate()
        for proc in processes:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["psql", PG_URL, "-q", "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)
        shutil.rmtree(work, ignore_errors=True)


def connections(node):
    text = requests.get(node + "/metrics", timeout=5).text
    m = re.search(r"^noted_sync_connections(?:\{[^}]*\})? (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def sign_up(base):
    name = "u" + secrets.token_hex(4)
    r = requests.post(base + "/v1/accounts", json={"username": name, "password": "correct horse battery"}, timeout=10)
    assert r.status_code == 201, r.text
    r = requests.post(base + "/v1/sessions", json={"username": name, "password": "correct horse battery"}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def open_session(base, token):
    ws = connect(base.replace("http://", "ws://") + "/v1/sync", open_timeout=10)
    ws.send(json.dumps({"type": "hello", "protocol": 1, "token": token, "device": str(uuid.uuid4()), "client": "deploy-test/1"}))
    welcome = json.loads(ws.recv(timeout=10))
    assert welcome["type"] == "welcome", welcome
    return ws


def receive_change(ws, record_id, timeout):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no change for {record_id} within {timeout} s"
        message = json.loads(ws.recv(timeout=left))
        if message.get("type") == "change" and message.get("id") == record_id:
            return message


def test_sessions_through_nginx_reach_both_nodes_and_see_each_others_edits(cluster):
    # The sample configuration keeps the nodes' metrics off the public side.
    assert requests.get(cluster["base"] + "/metrics", timeout=5).status_code == 403
    base, nodes = cluster["base"], cluster["nodes"]
    tokens = sign_up(base)
    # Discovery through the proxy names the one issuer every node shares.
    assert requests.get(base + "/.well-known/openid-configuration", timeout=5).json()["issuer"] == cluster["issuer"]
    # least_conn spreads the WebSockets: open them until both nodes hold some (bounded).
    sessions = []
    for _ in range(6):
        sessions.append(open_session(base, tokens["access_token"]))
        if all(connections(node) > 0 for node in nodes):
            break
    counts = [connections(node) for node in nodes]
    assert all(count > 0 for count in counts), f"sessions per node {counts}: nginx did not spread them"
    try:
        for round_index, writer in enumerate(sessions):
            record_id = str(uuid.uuid4())
            started = time.monotonic()
            writer.send(json.dumps({"type": "push", "changes": [{
                "ccid": str(uuid.uuid4()), "collection": "notes", "id": record_id, "baseRev": 0, "op": "upsert",
                "fields": {"title": {"set": f"through nginx {round_index}"}}}]}))
            while True:
                ack = json.loads(writer.recv(timeout=10))
                if ack.get("type") in ("ack", "reject"):
                    break
            assert ack["type"] == "ack" and ack["status"] == "applied", ack
            for other in sessions:
                if other is not writer:
                    change = receive_change(other, record_id, timeout=5)
                    assert change["fields"]["title"]["set"] == f"through nginx {round_index}"
            # Every other session, on either node, heard of it well within a second.
            assert time.monotonic() - started < 1.0
    finally:
        for ws in sessions:
            ws.close()


def test_an_attachment_goes_up_through_nginx_and_every_node_serves_it(cluster):
    # The sample configuration takes bodies up to 300m and streams them through unbuffered.
    import hashlib
    base, nodes = cluster["base"], cluster["nodes"]
    name = "att" + uuid.uuid4().hex[:8]
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": "correct horse battery"}).status_code == 201
    token = requests.post(base + "/v1/sessions", json={"username": name, "password": "correct horse battery"}).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    blob = os.urandom(8 * 1024 * 1024)
    sha = hashlib.sha256(blob).hexdigest()
    r = requests.put(f"{base}/v1/blobs/{sha}", data=blob, headers=dict(auth, **{"Content-Type": "application/pdf"}), timeout=60)
    assert r.status_code == 201, r.text
    for node in nodes:
        got = requests.get(f"{node}/v1/blobs/{sha}", headers=auth, timeout=30)
        assert got.status_code == 200 and got.content == blob
    ranged = requests.get(f"{base}/v1/blobs/{sha}", headers=dict(auth, Range="bytes=100-199"), timeout=30)
    assert ranged.status_code == 206 and ranged.content == blob[100:200]

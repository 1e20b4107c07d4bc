"""noted-server's settings from a config file, the environment and flags (issue 13), on the real
binary: a flag wins over the environment, which wins over the file, which wins over the
default; the operators' commands read the same file; a file with an unknown setting, a value of
the wrong type, a file that is not a JSON object or not there, and a value out of range each
stop the server before it starts, with a message naming where the value came from, and leave
the data directory as it was.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import json
import os
import re
import socket
import subprocess
import tempfile

import requests

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTED_")}
    env.update(extra)
    return env


def serve(args, env):
    """Starts the server; returns (process, base URL)."""
    proc = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"unexpected first line {line!r}; stderr: {proc.stderr.read()}")
    return proc, m.group(1)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def refused(args, env):
    """Runs the server expecting it to refuse its settings; returns standard error."""
    result = subprocess.run([BIN, *args], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0, f"started with {args}: {result.stdout}"
    assert "listening" not in result.stdout
    return result.stderr


def write(path, value):
    with open(path, "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))


def register(base, name):
    return requests.post(base + "/v1/accounts", json={"username": name, "password": "correct horse battery"}, timeout=30)


def test_the_file_is_read_and_the_environment_and_flags_win_over_it():
    work = tempfile.mkdtemp(prefix="noted-config-")
    data = os.path.join(work, "from-file")
    config = os.path.join(work, "noted.json")
    file_port, env_port, flag_port = free_port(), free_port(), free_port()
    write(config, {"port": file_port, "data": data, "no-registration": True, "max-pushes-per-second": 7,
                   "allowed-origins": ["https://notes.example"], "log-level": "error"})

    # The file alone: its port, its data directory, registration off.
    proc, base = serve(["--config", config], clean_environment())
    try:
        assert base.endswith(f":{file_port}")
        assert os.path.exists(os.path.join(data, "noted.sqlite"))
        r = register(base, "from-file")
        assert r.status_code == 403, r.text
    finally:
        stop(proc)

    # NOTED_CONFIG names it as well; the environment wins over it.
    proc, base = serve([], clean_environment(NOTED_CONFIG=config, NOTED_PORT=str(env_port)))
    try:
        assert base.endswith(f":{env_port}")
        assert register(base, "still-closed").status_code == 403
    finally:
        stop(proc)

    # A flag wins over both.
    proc, base = serve(["--config", config, "--port", str(flag_port)], clean_environment(NOTED_PORT=str(env_port)))
    try:
        assert base.endswith(f":{flag_port}")
    finally:
        stop(proc)

    # Without the file, the defaults: registration open.
    proc, base = serve(["--port", "0", "--data", os.path.join(work, "no-file")], clean_environment())
    try:
        assert register(base, "open-again").status_code == 201
    finally:
        stop(proc)


def test_the_operators_commands_read_the_file():
    work = tempfile.mkdtemp(prefix="noted-config-")
    data = os.path.join(work, "data")
    config = os.path.join(work, "noted.json")
    write(config, {"data": data})
    proc, base = serve(["--config", config, "--port", "0"], clean_environment())
    try:
        assert register(base, "listed-by-the-file").status_code == 201
    finally:
        stop(proc)
    result = subprocess.run([BIN, "users", "list", "--json"], capture_output=True, text=True, timeout=60,
                            env=clean_environment(NOTED_CONFIG=config))
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["username"] for line in result.stdout.splitlines()] == ["listed-by-the-file"]


def test_bad_settings_are_refused_naming_their_source_and_nothing_is_written():
    work = tempfile.mkdtemp(prefix="noted-config-")
    data = os.path.join(work, "data")
    config = os.path.join(work, "noted.json")
    env = clean_environment()

    write(config, {"data": data, "max-push-per-second": 100})
    err = refused(["--config", config], env)
    assert 'unknown setting "max-push-per-second"' in err and config in err, err

    write(config, {"data": data, "port": "eighty"})
    err = refused(["--config", config], env)
    assert f'"port" in {config}' in err, err

    write(config, {"data": data, "port": 70000})
    err = refused(["--config", config], env)
    assert f'"port" in {config}' in err and "70000" in err, err

    write(config, {"data": data, "no-registration": "sometimes"})
    err = refused(["--config", config], env)
    assert f'"no-registration" in {config}' in err, err

    write(config, '["port", 8080]')
    err = refused(["--config", config], env)
    assert "JSON object" in err, err

    write(config, '{"port": 80,')
    err = refused(["--config", config], env)
    assert "not valid JSON" in err, err

    err = refused(["--config", os.path.join(work, "missing.json")], env)
    assert "missing.json" in err and "could not be read" in err, err

    write(config, {"data": data})
    err = refused(["--config", config], clean_environment(NOTED_PORT="abc"))
    assert "NOTED_PORT" in err, err

    err = refused(["--config", config, "--port", "70000"], env)
    assert "--port" in err and "70000" in err, err

    err = refused(["--config", config], clean_environment(NOTED_HISTORY_DAYS="-1"))
    assert "NOTED_HISTORY_DAYS" in err, err

    # A list's flag is named as the flag is spelled (once per item), its variable and setting plural.
    err = refused(["--config", config, "--trusted-proxy", "not-an-address"], env)
    assert "--trusted-proxy:" in err and "not-an-address" in err, err
    err = refused(["--config", config], clean_environment(NOTED_TRUSTED_PROXIES="10.0.0.0/8, not-an-address"))
    assert "NOTED_TRUSTED_PROXIES" in err, err
    write(config, {"data": data, "trusted-proxies": ["10.0.0.0/8", "not-an-address"]})
    err = refused(["--config", config], env)
    assert f'"trusted-proxies" in {config}' in err, err

    # None of these opened, let alone made, the database.
    assert not os.path.exists(data), os.listdir(data)


def test_an_empty_variable_counts_as_unset():
    work = tempfile.mkdtemp(prefix="noted-config-")
    proc, base = serve(["--port", "0", "--data", os.path.join(work, "data")],
                       clean_environment(NOTED_METRICS_TOKEN="", NOTED_NO_REGISTRATION=""))
    try:
        assert register(base, "empty-is-unset").status_code == 201
    finally:
        stop(proc)

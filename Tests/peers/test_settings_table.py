"""README's table of noted-server's settings against the server itself (issue 47): every setting
is a flag, an environment variable and a key of the config file, and the table names each
once. Read from outside: the flags and their environment variables from `noted-server help
serve`, the config file's keys from the server's own refusal of an unknown one, the defaults
the help states. A setting added to the server and not to README (or the other way round), a
renamed variable, or a default that README and the help state differently fails here.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import json
import os
import re
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))
# Flags of the command line only, not settings: help, and the file of settings itself.
NOT_SETTINGS = {"--help", "--config"}
UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def readme_rows():
    """The table's rows: (flags, variables, default) as README writes them."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("| flag (setting in the file) | environment | default |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows.append((cells[0], cells[1], cells[2]))
    assert len(rows) >= 20, rows
    return rows


def file_key(flag_cell, flag):
    """The key of `flag` in the config file: its name, or the plural README names for it."""
    named = re.search(r"in the file `([a-z-]+)`", flag_cell)
    return named.group(1) if named and flag_cell.count("`--") == 1 else flag[2:]


def help_text():
    return subprocess.run([BIN, "help", "serve"], capture_output=True, text=True, timeout=30, check=True).stdout


def help_options(text):
    """Each option of `help serve` with the text of its help (lines joined)."""
    options, current = {}, None
    for line in text.splitlines():
        match = re.match(r"^\s{2}(--[a-z-]+)", line)
        if match:
            current = match.group(1)
            options[current] = line
        elif current and line.startswith(" " * 10):
            options[current] += " " + line.strip()
        else:
            current = None
    return options


def known_keys():
    """The config file's keys, as the server lists them when it refuses one it does not know."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "noted.json")
        with open(path, "w") as f:
            json.dump({"not-a-setting": 1}, f)
        answer = subprocess.run([BIN, "users", "list", "--config", path, "--data", d], capture_output=True, text=True, timeout=30)
    assert answer.returncode != 0 and '"not-a-setting"' in answer.stderr, answer.stderr
    listed = answer.stderr.split("settings are named as the flags are:", 1)[1].splitlines()[0]
    return {k.strip() for k in listed.split(",")}


def numbers(text):
    """The numbers a default cell states, units applied: `256 MiB` is 268435456."""
    out = []
    for value, unit in re.findall(r"(\d[\d,]*)\s*(KiB|MiB|GiB)?", text):
        out.append(int(value.replace(",", "")) * UNITS.get(unit, 1))
    return out


def test_every_setting_is_in_the_table_once_with_its_variable_and_file_key():
    rows = readme_rows()
    options = help_options(help_text())
    flags = {f for cell, _, _ in rows for f in re.findall(r"`(--[a-z-]+)", cell)}
    assert flags == set(options) - NOT_SETTINGS, (
        f"in README only: {sorted(flags - set(options))}; in the server only: {sorted(set(options) - NOT_SETTINGS - flags)}")
    keys = known_keys()
    readme_keys = set()
    for cell, variables, _ in rows:
        for flag in re.findall(r"`(--[a-z-]+)", cell):
            key = file_key(cell, flag)
            readme_keys.add(key)
            variable = "NOTED_" + key.upper().replace("-", "_")
            assert variable in variables, f"README: {flag}'s variable is {variable}, not {variables}"
            assert f"[{variable}" in options[flag], f"help serve: {flag} does not name {variable}: {options[flag]}"
    assert readme_keys == keys, f"config keys in README only: {sorted(readme_keys - keys)}; in the server only: {sorted(keys - readme_keys)}"


def test_the_defaults_the_help_states_are_readmes():
    rows = readme_rows()
    options = help_options(help_text())
    checked = 0
    for cell, _, default in rows:
        flags = re.findall(r"`(--[a-z-]+)", cell)
        stated = numbers(default)
        for index, flag in enumerate(flags):
            match = re.search(r"default (\d+)", options[flag])
            if not match:
                continue
            assert index < len(stated) and stated[index] == int(match.group(1)), (
                f"{flag}: help serve says default {match.group(1)}, README says {default!r}")
            checked += 1
    assert checked >= 10, f"only {checked} defaults compared"

"""The web app's Markdown preview with checklists (issue 17) in a real browser: headless
Chromium driven by Selenium against a real noted-server. Preview draws the body (headings, a
table, code, task items); a task's box edits the text as typing does and syncs, to the server
and to another session, offline too; a hostile body stays inert text; axe-core over the
preview. Skipped with a printed notice where Chromium cannot be found (as test_webapp.py, whose
helpers these are)."""
import time

import pytest

from test_webapp import (  # noqa: F401 (skips this module, as that one, without Chromium)
    By, Keys, axe_in_both_schemes, browser, button, new_note, open_note, register, run_server, server_note, server_notes, set_body,
    set_offline, sign_in, status, wait,
)

BODY = """# Shopping

Some **bold** text, `code` and a [link](https://example.com/list).

## Prices

| Item | Qty |
|:-----|----:|
| tea  | 2   |

```
- [ ] not a task: in a code block
```

- [ ] milk
- [ ] eggs
- [x] bread
"""

# Installed before any script of the page runs: records dialogs and policy violations.
WATCH = """
window.__dialogs = [];
for (const name of ["alert", "confirm", "prompt"]) {
  const original = window[name];
  window[name] = function (...args) { window.__dialogs.push(name + ": " + args.join(" ")); return original.apply(this, args); };
}
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sourceFile || "") + ":" + e.lineNumber));
"""


@pytest.fixture(scope="module")
def md_server():
    # Its own server: these tests sign in several browsers (the shared limit is 10 a minute).
    yield from run_server("--auth-attempts-per-minute", "1000")


@pytest.fixture
def two_sessions(md_server):
    """Two browsers signed in to one new account: (base, account, a, b)."""
    account = register(md_server, "md")
    a, b = browser(), browser()
    try:
        sign_in(a, md_server, account)
        sign_in(b, md_server, account)
        yield md_server, account, a, b
    finally:
        a.quit()
        b.quit()


def preview_button(driver):
    return driver.find_element(By.XPATH, "//button[normalize-space()='Preview']")


def preview_state(driver):
    return driver.execute_script("""
      const p = document.getElementById('preview');
      const boxes = [...p.querySelectorAll('input[type=checkbox]')];
      return {
        pressed: document.getElementById('preview-toggle').getAttribute('aria-pressed'),
        bodyHidden: document.getElementById('body').hidden, shown: !p.hidden,
        headings: [...p.querySelectorAll('h1, h2, h3')].map(h => h.tagName + ' ' + h.textContent),
        th: [...p.querySelectorAll('table th')].map(e => e.textContent),
        td: [...p.querySelectorAll('table td')].map(e => e.textContent + ' ' + e.className),
        pre: [...p.querySelectorAll('pre code')].map(e => e.textContent),
        boxes: boxes.map(b => b.checked),
        labels: boxes.map(b => { const l = document.getElementById(b.getAttribute('aria-labelledby')); return l ? l.textContent : null; }),
        links: [...p.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.rel, a.target]),
      };
    """)


def boxes(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#preview input[type=checkbox]")


def write_note(driver, base, account, title, body):
    """A new note with this body (set as typing would), once the server has it: its id."""
    new_note(driver, title, "x")
    set_body(driver, body)
    wait(driver, lambda d: any(r["fields"].get("title") == title and r["fields"].get("body") == body for r in server_notes(base, account)),
         timeout=10, message="the note on the server")
    return next(r["id"] for r in server_notes(base, account) if r["fields"].get("title") == title)


def toggled(body, index):
    """The body with the index-th "- [ ]"/"- [x]" line of the checklist flipped (the three items at the end)."""
    lines = body.split("\n")
    items = [k for k, line in enumerate(lines) if line.startswith(("- [ ] ", "- [x] "))][-3:]  # not the one in the code block
    k = items[index]
    lines[k] = ("- [x] " if lines[k].startswith("- [ ] ") else "- [ ] ") + lines[k][6:]
    return "\n".join(lines)


def test_preview_draws_the_body_and_a_checkbox_edits_the_text_as_typing_does(two_sessions):
    base, account, a, b = two_sessions
    note_id = write_note(a, base, account, "Checklist", BODY)
    # The caret somewhere in the text, to find again after the preview.
    a.execute_script("const b = document.getElementById('body'); b.focus(); b.setSelectionRange(12, 15)")
    preview_button(a).click()
    state = preview_state(a)
    assert state["pressed"] == "true" and state["bodyHidden"] and state["shown"], state
    assert state["headings"] == ["H1 Shopping", "H2 Prices"], state
    assert state["th"] == ["Item", "Qty"], state
    assert state["td"] == ["tea md-align-left", "2 md-align-right"], state
    assert state["pre"] == ["- [ ] not a task: in a code block"], state
    assert state["boxes"] == [False, False, True], state
    assert state["labels"] == ["milk", "eggs", "bread"], state
    assert state["links"] == [["https://example.com/list", "noopener noreferrer nofollow", "_blank"]], state
    assert a.execute_script("return localStorage.getItem('noted.preview')") == "on"

    # The other session has the note open in its preview too.
    open_note(b, "Checklist")
    wait(b, lambda d: d.execute_script("return document.getElementById('body').value") == BODY, message="b has the note")
    assert preview_state(b)["pressed"] == "false", "the choice is per device"
    preview_button(b).click()
    wait(b, lambda d: preview_state(d)["boxes"] == [False, False, True], message="b's preview")

    # The second box: "- [x] eggs" on the server, nothing else changed.
    boxes(a)[1].click()
    expected = toggled(BODY, 1)
    assert "- [x] eggs" in expected and expected != BODY
    wait(a, lambda d: server_note(base, account, note_id)["body"] == expected, timeout=10, message="the toggle on the server")
    assert server_note(base, account, note_id)["title"] == "Checklist"
    assert preview_state(a)["boxes"] == [False, True, True]
    assert a.execute_script("return document.getElementById('body').value") == expected
    wait(b, lambda d: preview_state(d)["boxes"] == [False, True, True], timeout=10, message="the other session's preview draws it again")
    assert b.execute_script("return document.getElementById('body').value") == expected

    # By keyboard: the checkbox is focusable, Space toggles it, the focus stays on it.
    box = boxes(a)[0]
    a.execute_script("arguments[0].focus()", box)
    a.switch_to.active_element.send_keys(Keys.SPACE)
    expected = toggled(expected, 0)
    wait(a, lambda d: server_note(base, account, note_id)["body"] == expected, timeout=10, message="the keyboard toggle on the server")
    assert a.execute_script("return document.activeElement.dataset.task") == "0", "the focus stays on the box drawn again"
    wait(b, lambda d: preview_state(d)["boxes"] == [True, True, True], timeout=10)

    # Preview off, by keyboard: the textarea again, the caret where it was.
    toggle = preview_button(a)
    a.execute_script("arguments[0].focus()", toggle)
    a.switch_to.active_element.send_keys(Keys.ENTER)
    state = preview_state(a)
    assert state["pressed"] == "false" and not state["bodyHidden"] and not state["shown"], state
    assert a.execute_script("const b = document.getElementById('body'); return [document.activeElement === b, b.selectionStart, b.selectionEnd]") == [True, 12, 15]
    assert a.execute_script("return localStorage.getItem('noted.preview')") == "off"
    # The choice is kept per device: b, which turned it on, opens in the preview after a reload.
    b.refresh()
    wait(b, lambda d: d.find_element(By.ID, "app").is_displayed())
    open_note(b, "Checklist")
    wait(b, lambda d: preview_state(d)["pressed"] == "true" and preview_state(d)["boxes"] == [True, True, True], message="b still previews")


def test_toggles_made_offline_in_two_sessions_converge(two_sessions):
    base, account, a, b = two_sessions
    note_id = write_note(a, base, account, "Offline list", BODY)
    for driver in (a, b):
        open_note(driver, "Offline list")
        wait(driver, lambda d: "- [ ] milk" in d.execute_script("return document.getElementById('body').value"))
        if preview_state(driver)["pressed"] != "true":
            preview_button(driver).click()
        wait(driver, lambda d: preview_state(d)["boxes"] == [False, False, True])
    time.sleep(1)  # the service workers have cached the shell
    for driver in (a, b):
        set_offline(driver, True)
        wait(driver, lambda d: status(d).startswith("offline"), message="offline")
    boxes(a)[0].click()  # milk, in a
    boxes(b)[2].click()  # bread, in b
    wait(a, lambda d: status(d) == "offline · 1 pending", message="a's toggle pending")
    wait(b, lambda d: status(d) == "offline · 1 pending", message="b's toggle pending")
    assert server_note(base, account, note_id)["body"] == BODY, "nothing reached the server"
    for driver in (a, b):
        set_offline(driver, False)
    both = toggled(toggled(BODY, 0), 2)
    wait(a, lambda d: server_note(base, account, note_id)["body"] == both, timeout=20, message="both toggles on the server")
    for driver in (a, b):
        wait(driver, lambda d: preview_state(d)["boxes"] == [True, False, False], timeout=15, message="both toggles in each preview")
        assert driver.execute_script("return document.getElementById('body').value") == both


HOSTILE = """# Hostile <script>alert('h1')</script>

<script>alert(1)</script>
<img src=x onerror=alert(2)>
<a href="javascript:alert(3)">html link</a>
[click me](javascript:alert(4)) [mixed case](JaVaScRiPt:alert(5)) [tab](java&#x09;script:alert(6))
[data](data:text/html,<script>alert(7)</script>) ![img](javascript:alert(8)) <javascript:alert(9)>
![remote picture](https://example.com/tracker.png) ![offline picture](attachment:""" + "ab" * 32 + """)

- [ ] <img src=y onerror=alert(10)> a task
"""


def test_a_hostile_body_renders_as_inert_text(md_server):
    base = md_server
    account = register(base, "mdbad")
    driver = browser(console=True)
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
        sign_in(driver, base, account)
        write_note(driver, base, account, "Hostile", HOSTILE)
        if preview_state(driver)["pressed"] != "true":
            preview_button(driver).click()
        wait(driver, lambda d: len(boxes(d)) == 1, message="the preview")
        time.sleep(0.5)  # anything that would run or load has had its chance
        found = driver.execute_script("""
          const p = document.getElementById('preview');
          return {
            scripts: p.querySelectorAll('script').length, imgs: p.querySelectorAll('img').length,
            handlers: [...p.querySelectorAll('*')].flatMap(e => [...e.attributes].map(a => a.name)).filter(n => n.startsWith('on')),
            hrefs: [...p.querySelectorAll('[href], [src]')].map(e => e.getAttribute('href') || e.getAttribute('src')),
            text: p.textContent, dialogs: window.__dialogs, csp: window.__csp,
          };
        """)
        assert found["scripts"] == 0 and found["imgs"] == 0 and found["handlers"] == [], found
        assert found["hrefs"] == ["https://example.com/tracker.png"], found  # the remote image, as a link only
        assert not any("javascript" in h.lower() or h.startswith("data:") for h in found["hrefs"]), found
        for shown in ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "[click me](javascript:alert(4))",
                      "[tab](java&#x09;script:alert(6))", "<javascript:alert(9)>", "offline picture (attachment not available offline)"]:
            assert shown in found["text"], shown
        assert found["dialogs"] == [], found
        assert found["csp"] == [], found
        assert not driver.find_elements(By.CSS_SELECTOR, "#preview a[href^='javascript' i]")
        console = [entry["message"] for entry in driver.get_log("browser")]
        assert not [m for m in console if "Content Security Policy" in m or "Content-Security-Policy" in m], console
        assert driver.execute_script("return document.title") == "Noted"  # the page is still itself (no alert blocked it)
    finally:
        driver.quit()


def test_the_preview_passes_axe_core(md_server):
    """axe-core over the app with a checklist note (a box ticked) in the preview, in the light and
    the dark colour scheme: no violation of any impact, as for the rest of the app."""
    pytest.importorskip("axe_selenium_python")
    base = md_server
    account = register(base, "mdaxe")
    driver = browser()
    try:
        sign_in(driver, base, account)
        write_note(driver, base, account, "Accessible checklist", BODY + "\n> a quote with *emphasis*\n\n1. one\n2. two\n\n* [ ]\n")
        if preview_state(driver)["pressed"] != "true":
            preview_button(driver).click()
        boxes(driver)[1].click()
        wait(driver, lambda d: preview_state(d)["boxes"] == [False, True, True, False])  # the last one has no text
        assert driver.execute_script("return document.querySelectorAll('#preview input')[3].getAttribute('aria-label')") == "Task 4"
        found = []
        axe_in_both_schemes(driver, "notes app with a checklist in the preview", found)
        assert not found, "\n".join(found)
    finally:
        driver.quit()

"""A WebDriver client over HTTP with the standard library only, enough to
drive Debian's chromium headless through its chromedriver: sessions,
navigation, elements, clicks, typing, script, screenshots and the
browser's console log."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(Exception):
    pass


def _call(url, method="GET", body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read().decode() or "{}")
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        raise WebDriverError("%s %s: %d %s" % (method, url, e.code,
                                               text[:500])) from None


def find_browser():
    """(chromium, chromedriver) paths, or None when either is missing."""
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        return None
    return chromium, driver


class Browser:
    def __init__(self, chromium, driver, port, log_path):
        self.log = open(log_path, "w")
        self.profile = tempfile.mkdtemp(prefix="rl-console-chromium-")
        self.proc = subprocess.Popen(
            [driver, "--port=%d" % port], stdout=self.log,
            stderr=subprocess.STDOUT)
        self.base = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 30
        while True:
            try:
                if _call(self.base + "/status", timeout=5)["value"]["ready"]:
                    break
            except (OSError, WebDriverError, KeyError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox",
                         "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000",
                         "--user-data-dir=" + self.profile],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        value = _call(self.base + "/session", "POST", caps, timeout=90)
        self.session = self.base + "/session/" + value["value"]["sessionId"]

    def quit(self):
        try:
            _call(self.session, "DELETE", timeout=30)
        except (OSError, WebDriverError, AttributeError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.log.close()

    def cmd(self, method, path, body=None):
        return _call(self.session + path, method, body)["value"]

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def url(self):
        return self.cmd("GET", "/url")

    def find(self, css):
        """Element ids matching css (possibly none)."""
        return [e[ELEMENT] for e in self.cmd(
            "POST", "/elements", {"using": "css selector", "value": css})]

    def one(self, css):
        found = self.find(css)
        if len(found) != 1:
            raise WebDriverError("%d elements match %s" % (len(found), css))
        return found[0]

    def text(self, el):
        return self.cmd("GET", "/element/%s/text" % el)

    def attr(self, el, name):
        return self.cmd("GET", "/element/%s/attribute/%s" % (el, name))

    def click(self, el):
        self.cmd("POST", "/element/%s/click" % el, {})

    def type(self, el, text):
        self.cmd("POST", "/element/%s/value" % el, {"text": text})

    def script(self, source, *args):
        return self.cmd("POST", "/execute/sync",
                        {"script": source, "args": list(args)})

    def screenshot(self, path):
        png = base64.b64decode(self.cmd("GET", "/screenshot"))
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(png)
        return path

    def console_log(self):
        """The browser's console entries since the last call."""
        return _call(self.session + "/se/log", "POST",
                     {"type": "browser"})["value"]

"""console_browser.py ORIGIN TOKEN SCREENSHOT — signs in to the console at
ORIGIN (kubectl port-forward to the chart's console Service) in headless
chromium and opens the approval page, as a person would: /approvals sends
the browser to /signin, the token signs in, the browser lands on
/approvals. Exit 0 when it did, 1 with the reason otherwise, 77 when
chromium or chromedriver is missing."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "console"))
from webdriver import Browser, WebDriverError, find_browser  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(pred, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.2)
    return pred()


def main():
    origin, token, shot = sys.argv[1], sys.argv[2], sys.argv[3]
    paths = find_browser()
    if paths is None:
        print("chromium or chromedriver not installed")
        return 77
    browser = Browser(paths[0], paths[1], free_port(),
                      os.path.join(os.path.dirname(shot), "chromedriver.log"))
    try:
        browser.go(origin + "/approvals")
        if browser.url() != origin + "/signin":
            print("not signed in, /approvals went to %s" % browser.url())
            return 1
        browser.type(browser.one("#token"), token)
        browser.click(browser.one("#signin"))
        if not wait_for(lambda: browser.url() == origin + "/approvals", 15):
            print("after sign-in the browser is on %s" % browser.url())
            return 1
        browser.screenshot(shot)
        return 0
    except WebDriverError as e:
        print("webdriver: %s" % e)
        return 1
    finally:
        browser.quit()


if __name__ == "__main__":
    sys.exit(main())

"""The admin console in a real browser (issue 20): Debian's chromium driven over WebDriver
(chromium-driver) with selenium from a pinned venv (deploy/console-test.sh), against the
embedded system started from the built binary. Signs in, changes a setting, creates and revokes
a key set, finds one user among 10,000 by search, revokes its session and deletes it, and
checks the pages at 360 px. Screenshots of the main pages go to LATCHKEY_SCREENSHOTS when set.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = os.environ.get("LATCHKEY_BIN", str(ROOT / "target/debug/latchkey"))
USERS = int(os.environ.get("LATCHKEY_CONSOLE_USERS", "10000"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base, project):
        self.base = base
        self.project = project

    def call(self, method, path, access, body=None):
        key_header, key = {
            "server": ("x-stack-secret-server-key", self.project["secret_server_key"]),
            "admin": ("x-stack-super-secret-admin-key", self.project["super_secret_admin_key"]),
        }[access]
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "content-type": "application/json",
            "x-stack-access-type": access,
            "x-stack-project-id": self.project["project_id"],
            key_header: key,
        })
        try:
            with urllib.request.urlopen(request, timeout=30) as res:
                return res.status, json.loads(res.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


class ConsoleInChromium(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="latchkey-console-")
        port = free_port()
        # Rate limits off: the seeding comes from one address.
        env = dict(os.environ, LATCHKEY_HTTP_ADDR=f"127.0.0.1:{port}", RUST_LOG="warn",
                   LATCHKEY_RATE_LIMITS="off")
        cls.server = subprocess.Popen([BIN], cwd=cls.dir, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cls.base = f"http://127.0.0.1:{port}"
        # The console is served from localhost, so its cookies are first-party and scoped.
        cls.console = f"http://localhost:{port}"
        project_file = pathlib.Path(cls.dir, "latchkey-data/project.json")
        deadline = time.time() + 90
        while not project_file.exists():
            if time.time() > deadline or cls.server.poll() is not None:
                raise RuntimeError("the embedded system did not start")
            time.sleep(0.2)
        time.sleep(0.5)
        cls.project = json.loads(project_file.read_text())
        cls.api = Api(cls.base, cls.project)
        cls.seed()
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,900"]:
            options.add_argument(arg)
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        cls.driver = webdriver.Chrome(service=service, options=options)
        cls.wait = WebDriverWait(cls.driver, 20)
        cls.shots = os.environ.get("LATCHKEY_SCREENSHOTS")

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.terminate()
        cls.server.wait(timeout=30)
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def seed(cls):
        def create(i):
            status, _ = cls.api.call("POST", "/api/v1/users", "server", {
                "primary_email": f"person-{i:05d}@example.com",
                "display_name": f"Person {i:05d}",
            })
            assert status == 201, status
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(USERS)))

    def shot(self, name):
        if self.shots:
            pathlib.Path(self.shots).mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(pathlib.Path(self.shots, f"{name}.png")))

    def find(self, css):
        return self.wait.until(ready.presence_of_element_located((By.CSS_SELECTOR, css)))

    def submit(self, form_css):
        self.driver.find_element(By.CSS_SELECTOR, f"{form_css} button[type=submit]").click()

    def test_an_operator_manages_the_project_keys_and_users(self):
        d = self.driver
        d.get(self.console + "/console")
        self.find("#admin_key")
        self.shot("sign-in")
        self.find("#project_id").send_keys(self.project["project_id"])
        self.find("#admin_key").send_keys(self.project["super_secret_admin_key"])
        self.submit("form[action='/console/sign-in']")
        self.wait.until(ready.url_contains("/console/project"))
        # The key is nowhere the page or its script can reach.
        self.assertNotIn(self.project["super_secret_admin_key"], d.page_source)
        self.assertNotIn(self.project["super_secret_admin_key"], d.current_url)
        self.assertEqual(d.execute_script("return document.cookie"), "")
        self.assertEqual(d.execute_script("return window.localStorage.length"), 0)

        # A setting changes, as the API then shows.
        field = self.find("#s-password_min_length")
        field.clear()
        field.send_keys("12")
        self.submit("form.settings")
        self.find("p.notice")
        self.shot("project")
        _, settings = self.api.call("GET", "/api/v1/internal/project", "admin")
        self.assertEqual(settings["password_min_length"], 12)
        # A refused value comes back next to its field, with the API's message.
        field = self.find("#s-password_min_length")
        field.clear()
        field.send_keys("3")
        self.submit("form.settings")
        error = self.find("#e-password_min_length")
        self.assertIn("password_min_length", error.text)
        # A test mail goes out with the saved mail settings; the answer shows beside its form.
        self.find("#recipient_email").send_keys("ops@example.com")
        self.submit("form.test-mail")
        self.assertIn("A test mail went to ops@example.com", self.find("#test-mail-outcome").text)
        _, mails = self.api.call("GET", "/api/v1/internal/emails", "admin")
        self.assertEqual([m["to"] for m in mails["items"] if m["template"] == "test"],
                         ["ops@example.com"])

        # A key set is created, its keys shown once, then revoked after confirming.
        d.get(self.console + "/console/keys")
        self.find("#description").send_keys("made in the browser")
        self.submit("form[action='/console/keys']")
        created = self.find("section.created")
        self.assertIn("ssk_", created.text)
        _, keys = self.api.call("GET", "/api/v1/internal/api-keys", "admin")
        made = [k for k in keys["items"] if k["description"] == "made in the browser"]
        self.assertEqual(len(made), 1)
        d.get(self.console + f"/console/keys/{made[0]['id']}/revoke")
        self.submit("form[action$='/revoke']")
        # The confirmation page's own address starts alike: wait for the list itself.
        self.wait.until(ready.url_to_be(self.console + "/console/keys"))
        _, keys = self.api.call("GET", "/api/v1/internal/api-keys", "admin")
        self.assertTrue([k for k in keys["items"] if k["id"] == made[0]["id"]][0]["revoked"])

        # One user among the seeded ones, found by search; its session revoked; then deleted.
        status, users = self.api.call("GET", "/api/v1/users?query=person-07777@example.com", "server")
        self.assertEqual(status, 200)
        target = users["items"][0]["id"]
        status, _ = self.api.call("POST", "/api/v1/auth/sessions", "server", {"user_id": target})
        self.assertEqual(status, 200)
        d.get(self.console + "/console/users")
        self.find("#query").send_keys("person-07777")
        self.submit("form.search")
        self.wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "table tbody tr")) == 1)
        self.shot("users")
        d.find_element(By.LINK_TEXT, "person-07777@example.com").click()
        self.find("form[action$='/sessions/revoke-all']")
        self.shot("user")
        sessions = d.find_elements(By.CSS_SELECTOR, "form[action*='/sessions/'][action$='/revoke'] button")
        self.assertEqual(len(sessions), 1)
        sessions[0].click()
        self.assertIn("revoked", self.find("p.notice").text)
        _, listed = self.api.call("GET", f"/api/v1/auth/sessions?user_id={target}", "server")
        self.assertEqual(listed["items"], [])
        d.get(self.console + f"/console/users/{target}/delete")
        self.submit("form[action$='/delete']")
        self.wait.until(ready.url_to_be(self.console + "/console/users"))
        status, _ = self.api.call("GET", f"/api/v1/users/{target}", "server")
        self.assertEqual(status, 404)

        # A member is added to a team from the team's page.
        status, owner = self.api.call("GET", "/api/v1/users?query=person-00001@example.com", "server")
        owner_id = owner["items"][0]["id"]
        status, team = self.api.call("POST", "/api/v1/teams", "server",
                                     {"display_name": "Browser team", "creator_user_id": owner_id})
        self.assertEqual(status, 201)
        _, joiner = self.api.call("GET", "/api/v1/users?query=person-00002@example.com", "server")
        d.get(self.console + "/console/teams")
        d.find_element(By.LINK_TEXT, "Browser team").click()
        self.find("#user_id").send_keys(joiner["items"][0]["id"])
        self.submit("form[action$='/members']")
        self.assertIn("added", self.find("p.notice").text)
        self.shot("team")
        _, members = self.api.call("GET", f"/api/v1/team-member-profiles?team_id={team['id']}", "server")
        self.assertEqual(len(members["items"]), 2)

        # A webhook endpoint: a test event is delivered (nothing listens, so the attempt fails
        # and is logged), then replayed from the delivery log.
        d.get(self.console + "/console/webhooks")
        self.find("#url").send_keys("http://127.0.0.1:9/browser-hook")
        self.submit("form[action='/console/webhooks']")
        self.assertIn("whsec_", self.find("section.created").text)
        d.find_element(By.LINK_TEXT, "http://127.0.0.1:9/browser-hook").click()
        self.submit("form[action$='/test']")
        self.find("p.notice")
        # Reloading the answer of the form would send the test event again; load the page.
        endpoint_page = d.current_url.rsplit("/test", 1)[0]
        # The test event's own row is the one to look at: another test's events may share it.
        test_row = "//tr[td[2][normalize-space()='service.test']]"
        deadline = time.time() + 20
        while not d.find_elements(By.XPATH, test_row + "//ol[@class='attempts']/li"):
            self.assertLess(time.time(), deadline, "no delivery attempt shown")
            time.sleep(0.3)
            d.get(endpoint_page)
        self.assertEqual(len(d.find_elements(By.XPATH, test_row)), 1)
        self.shot("webhook")
        d.find_element(By.XPATH, test_row + "//form[contains(@action, '/replay')]//button").click()
        self.assertIn("delivered again", self.find("p.notice").text)

        # Readable at 360 px: nothing wider than the window but the tables, which scroll.
        d.set_window_size(360, 800)
        for path in ["/console/project", "/console/keys", "/console/users", "/console/teams",
                     "/console/webhooks", "/console/mail"]:
            d.get(self.console + path)
            self.find("main")
            width = d.execute_script("return document.documentElement.scrollWidth")
            inner = d.execute_script("return window.innerWidth")
            self.assertLessEqual(width, inner, path)
        self.shot("users-360")
        d.set_window_size(1280, 900)


if __name__ == "__main__":
    unittest.main(verbosity=2)

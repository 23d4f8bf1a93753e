"""A small, stateful stand-in for GitHub's REST API on 127.0.0.1, for the real PyGithub client.

It keeps issue comments between requests, paginates them with Link headers the
way GitHub does, refuses writes (403) for a read-only token, answers /user with
403 for the workflow token (as GitHub does for GITHUB_TOKEN), can answer with
server errors on demand (`failures`, `always`), and records every request so a
test can assert that an unchanged comment caused no write.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

WORKFLOW_TOKEN = "workflow-token"
APP_TOKEN = "app-token"  # a GitHub App's installation token: /user refused, posts as its bot
APP_BOT = "twicerun-app[bot]"
READ_ONLY_TOKEN = "read-only-token"
BOT = "github-actions[bot]"


class FakeGitHub:
    def __init__(self, owner: str = "octo", repo: str = "pipes"):
        self.owner, self.repo = owner, repo
        self.comments: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        # Statuses to answer the next requests with, one each, before behaving;
        # `always` answers every request with that status.
        # Open pull requests: {"number", "head_sha", "head_owner", "head_branch"}.
        self.pulls: list[dict] = []
        self.failures: list[int] = []
        self.always: int | None = None
        self._next_id = 1000
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # serve_forever checks for shutdown every poll_interval (0.5 s by default), which
        # every test using the server paid again on its way out.
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> FakeGitHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # State the tests inspect or seed ------------------------------------------------

    def add_comment(self, number: int, body: str, login: str) -> dict:
        with self._lock:
            self._next_id += 1
            comment = {
                "id": self._next_id,
                "number": number,
                "body": body,
                "user": {
                    "login": login,
                    "id": 41898282 if login == BOT else 7,
                    "type": "Bot" if login.endswith("[bot]") else "User",
                },
                "created_at": "2026-11-30T00:00:00Z",
                "updated_at": "2026-11-30T00:00:00Z",
            }
            self.comments.append(comment)
            return comment

    def writes(self) -> list[tuple[str, str]]:
        return [r for r in self.requests if r[0] in ("POST", "PATCH")]

    def ours(self, number: int) -> list[dict]:
        return [c for c in self.comments if c["number"] == number and c["user"]["login"] == BOT]

    # JSON shapes --------------------------------------------------------------------

    def _repo_path(self) -> str:
        return f"/repos/{self.owner}/{self.repo}"

    def _comment_json(self, c: dict) -> dict:
        return {
            **{k: v for k, v in c.items() if k != "number"},
            "url": f"{self.url}{self._repo_path()}/issues/comments/{c['id']}",
            "html_url": f"https://github.test/{self.owner}/{self.repo}/pull/{c['number']}#issuecomment-{c['id']}",
            "issue_url": f"{self.url}{self._repo_path()}/issues/{c['number']}",
        }

    def _issue_json(self, number: int) -> dict:
        return {
            "id": number,
            "number": number,
            "title": "a pull request",
            "state": "open",
            "url": f"{self.url}{self._repo_path()}/issues/{number}",
            "comments_url": f"{self.url}{self._repo_path()}/issues/{number}/comments",
            "html_url": f"https://github.test/{self.owner}/{self.repo}/pull/{number}",
            "user": {"login": "contributor", "id": 9, "type": "User"},
            "pull_request": {"url": f"{self.url}{self._repo_path()}/pulls/{number}"},
        }

    # The HTTP side ----------------------------------------------------------------------

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                return

            def _token(self) -> str:
                header = self.headers.get("Authorization", "")
                return header.split(" ", 1)[1] if " " in header else ""

            def _send(self, status: int, payload, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _route(self, method: str):
                parsed = urlparse(self.path)
                path = parsed.path
                fake.requests.append((method, path))
                if fake.always is not None or fake.failures:
                    status = fake.always if fake.always is not None else fake.failures.pop(0)
                    return self._send(status, {"message": "Server Error"})
                token = self._token()
                repo = fake._repo_path()
                if method == "GET" and path == "/user":
                    if token in (WORKFLOW_TOKEN, READ_ONLY_TOKEN, APP_TOKEN):
                        return self._send(
                            403, {"message": "Resource not accessible by integration"}
                        )
                    return self._send(200, {"login": token, "id": 1, "type": "User"})
                if method == "GET" and path == repo:
                    return self._send(
                        200,
                        {
                            "id": 1,
                            "name": fake.repo,
                            "full_name": f"{fake.owner}/{fake.repo}",
                            "owner": {"login": fake.owner},
                            "url": f"{fake.url}{repo}",
                        },
                    )
                if method == "GET" and path == f"{repo}/pulls":
                    query = parse_qs(parsed.query)
                    head = query.get("head", [""])[0]
                    found = [
                        {
                            "number": p["number"],
                            "state": "open",
                            "url": f"{fake.url}{repo}/pulls/{p['number']}",
                            "head": {
                                "sha": p["head_sha"],
                                "ref": p["head_branch"],
                                "label": f"{p['head_owner']}:{p['head_branch']}",
                                "repo": {"full_name": f"{p['head_owner']}/{fake.repo}"},
                            },
                        }
                        for p in fake.pulls
                        if not head or head == f"{p['head_owner']}:{p['head_branch']}"
                    ]
                    return self._send(200, found)
                if (m := re.fullmatch(rf"{repo}/issues/(\d+)", path)) and method == "GET":
                    return self._send(200, fake._issue_json(int(m.group(1))))
                if m := re.fullmatch(rf"{repo}/issues/(\d+)/comments", path):
                    number = int(m.group(1))
                    if method == "GET":
                        query = parse_qs(parsed.query)
                        per_page = int(query.get("per_page", ["30"])[0])
                        page = int(query.get("page", ["1"])[0])
                        mine = [c for c in fake.comments if c["number"] == number]
                        chunk = mine[(page - 1) * per_page : page * per_page]
                        headers = {}
                        last = max(1, -(-len(mine) // per_page))
                        links = []
                        base = f"{fake.url}{path}?per_page={per_page}"
                        if page < last:
                            links.append(f'<{base}&page={page + 1}>; rel="next"')
                            links.append(f'<{base}&page={last}>; rel="last"')
                        if links:
                            headers["Link"] = ", ".join(links)
                        return self._send(200, [fake._comment_json(c) for c in chunk], headers)
                    if method == "POST":
                        if token == READ_ONLY_TOKEN:
                            return self._send(
                                403, {"message": "Resource not accessible by integration"}
                            )
                        login = {WORKFLOW_TOKEN: BOT, APP_TOKEN: APP_BOT}.get(token, token)
                        comment = fake.add_comment(number, self._body()["body"], login)
                        return self._send(201, fake._comment_json(comment))
                if m := re.fullmatch(rf"{repo}/issues/comments/(\d+)", path):
                    comment = next((c for c in fake.comments if c["id"] == int(m.group(1))), None)
                    if comment is None:
                        return self._send(404, {"message": "Not Found"})
                    if method == "PATCH":
                        if token == READ_ONLY_TOKEN:
                            return self._send(
                                403, {"message": "Resource not accessible by integration"}
                            )
                        comment["body"] = self._body()["body"]
                        comment["updated_at"] = "2026-11-30T00:01:00Z"
                        return self._send(200, fake._comment_json(comment))
                    if method == "GET":
                        return self._send(200, fake._comment_json(comment))
                return self._send(404, {"message": "Not Found", "path": path})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

        return Handler

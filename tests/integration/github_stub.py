#!/usr/bin/env python3
"""A stand-in for the GitHub REST API on loopback, for tests/integration/test_pr_review.sh.

  github_stub.py DIR TOKEN

DIR holds pr.json (the pull request object), files.json (its changed files)
and git/ (bare repositories, served read-only by `git http-backend` under
/git/OWNER/NAME.git). Every API call must carry "Authorization: Bearer TOKEN"
(else 401). It serves
  GET  /repos/O/N/pulls/K            pr.json
  GET  /repos/O/N/pulls/K/files      files.json, paginated (per_page, page, Link)
  GET  /repos/O/N/pulls/K/reviews    the reviews posted so far
  POST /repos/O/N/pulls/K/reviews    records the review (DIR/posted.jsonl, one
                                     line per POST); while DIR/hold exists it
                                     answers only after the file is removed;
                                     while DIR/reject_comments exists a review
                                     with line comments gets 422, as GitHub
                                     answers one whose line is not in its diff
  GET  /repos/O/N/pulls?head=O:REF    the pull requests opened so far (state open), of that head
  POST /repos/O/N/pulls              opens one (DIR/pulls.jsonl, one line per POST; 201 and
                                     the pull request, number 100 on): for
                                     workflows/specialist_loop.lua
Git requests for a repository named private-* need the token as well; a
repository whose config says http.receivepack true takes pushes.
Each request line goes to DIR/requests.log with whether it carried the token.
The port goes to DIR/port once it listens.
"""
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

DIR, TOKEN = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


def load(name):
    with open(os.path.join(DIR, name)) as f:
        return json.load(f)


def posted():
    path = os.path.join(DIR, "posted.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def authorized(self):
        return self.headers.get("Authorization") == "Bearer " + TOKEN

    def note(self):
        with LOCK, open(os.path.join(DIR, "requests.log"), "a") as f:
            f.write("%s %s token=%s\n" % (self.command, self.path, "yes" if self.authorized() else "no"))

    def send(self, status, obj, link=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        if link:
            self.send_header("Link", link)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def route(self):
        self.note()
        u = urlsplit(self.path)
        if u.path.startswith("/git/"):
            return self.git(u)
        if not self.authorized():
            return self.send(401, {"message": "Bad credentials"})
        parts = u.path.strip("/").split("/")
        q = parse_qs(u.query)
        pr = load("pr.json")
        owner, name = pr["base"]["repo"]["owner"]["login"], pr["base"]["repo"]["name"]
        if parts == ["repos", owner, name, "pulls"]:
            return self.pulls(q)
        if len(parts) < 5 or parts[:5] != ["repos", owner, name, "pulls", str(pr["number"])]:
            return self.send(404, {"message": "Not Found"})
        rest = parts[5:]
        if rest == [] and self.command == "GET":
            return self.send(200, pr)
        if rest == ["files"] and self.command == "GET":
            files = load("files.json")
            return self.page(files, q)
        if rest == ["reviews"] and self.command == "GET":
            return self.page([r["answer"] for r in posted()], q)
        if rest == ["reviews"] and self.command == "POST":
            try:
                review = json.loads(self.body())
            except ValueError:
                return self.send(400, {"message": "Problems parsing JSON"})
            if review.get("comments") and os.path.exists(os.path.join(DIR, "reject_comments")):
                return self.send(422, {"message": "Unprocessable Entity",
                                       "errors": ["Line could not be resolved"]})
            with LOCK:
                n = len(posted()) + 1
                answer = {"id": 1000 + n, "body": review.get("body", ""), "state": "COMMENTED",
                          "commit_id": review.get("commit_id"),
                          "html_url": "http://127.0.0.1/%s/%s/pull/%d#pullrequestreview-%d" % (
                              owner, name, pr["number"], 1000 + n)}
                with open(os.path.join(DIR, "posted.jsonl"), "a") as f:
                    f.write(json.dumps({"request": review, "answer": answer}) + "\n")
            while os.path.exists(os.path.join(DIR, "hold")):
                time.sleep(0.05)  # the test kills the engine meanwhile
            return self.send(200, answer)
        return self.send(404, {"message": "Not Found"})

    def page(self, items, q):
        """One page of a list, with GitHub's Link header when more follow. The
        page size is what was asked for, at most DIR/page_size when that file
        exists (a server may give fewer than per_page)."""
        per, page = int(q.get("per_page", ["30"])[0]), int(q.get("page", ["1"])[0])
        cap = os.path.join(DIR, "page_size")
        if os.path.exists(cap):
            per = min(per, int(open(cap).read()))
        link = None
        if page * per < len(items):
            link = '<http://127.0.0.1:%d%s?per_page=%d&page=%d>; rel="next"' % (
                self.server.server_address[1], urlsplit(self.path).path, per, page + 1)
        return self.send(200, items[(page - 1) * per:page * per], link)

    def pulls(self, q):
        """The pull requests this stub opened: listed by head, or one more opened."""
        path = os.path.join(DIR, "pulls.jsonl")
        with LOCK:
            opened = []
            if os.path.exists(path):
                with open(path) as f:
                    opened = [json.loads(line) for line in f if line.strip()]
            if self.command == "GET":
                head = q.get("head", [""])[0]
                return self.send(200, [p for p in opened if not head or p["head"]["label"] == head])
            req = json.loads(self.body() or b"{}")
            missing = [k for k in ("title", "head", "base") if not req.get(k)]
            if missing:
                return self.send(422, {"message": "Validation Failed", "errors": [{"field": k, "code": "missing_field"} for k in missing]})
            pr = load("pr.json")
            owner = pr["base"]["repo"]["owner"]["login"]
            number = 100 + len(opened)
            made = {"number": number, "state": "open", "draft": bool(req.get("draft")), "title": req["title"],
                    "body": req.get("body"), "html_url": "https://github.com/%s/%s/pull/%d" % (owner, pr["base"]["repo"]["name"], number),
                    "head": {"ref": req["head"], "label": owner + ":" + req["head"]}, "base": {"ref": req["base"]}}
            with open(path, "a") as f:
                f.write(json.dumps(made) + "\n")
        return self.send(201, made)

    def git(self, u):
        """git http-backend as a CGI program: the smart HTTP protocol."""
        path = u.path[len("/git"):]
        if "/private-" in path and not self.authorized():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        env = {"PATH": "/usr/bin:/bin", "GIT_PROJECT_ROOT": os.path.join(DIR, "git"), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": path, "QUERY_STRING": u.query, "REQUEST_METHOD": self.command,
               "CONTENT_TYPE": self.headers.get("Content-Type", ""), "REMOTE_ADDR": "127.0.0.1",
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
               "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", "")}
        data = self.body() if self.command == "POST" else b""
        env["CONTENT_LENGTH"] = str(len(data))
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        if not _:
            head, _, body = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(os.path.join(DIR, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()

"""A tiny Hugging Face Hub on 127.0.0.1: what `harvest publish` (huggingface_hub 2.4) and `load_dataset`
of a Hub dataset (datasets 5.2) call, with repository visibility and files served back.

Writes
  POST /api/repos/create                         -> {"url": ...}; 409 when the repo exists (visibility kept)
  POST /api/validate-yaml                        -> the card's YAML front matter parsed and checked (400 if bad)
  POST /api/datasets/<ns>/<name>/preupload/<rev> -> every file "regular" (so no LFS/xet transfer is needed)
  POST /api/datasets/<ns>/<name>/commit/<rev>    -> NDJSON: header + one base64 "file" / "deletedFile" line each
  PUT  /api/datasets/<ns>/<name>/settings        -> {"private": bool} changes the visibility
Reads (a private repository answers 404 RepoNotFound to a request without a token, as the Hub does)
  GET  /api/datasets/<ns>/<name>[/revision/<rev>] -> repo info: id, sha, private, siblings
  GET  /api/datasets/<ns>/<name>/tree/<rev>[/<path>][?recursive=...] -> files and folders under path
  POST /api/datasets/<ns>/<name>/paths-info/<rev> -> the entries of the given paths
  HEAD|GET /datasets/<ns>/<name>/resolve/<rev>/<path> -> the file, with ETag and X-Repo-Commit
Anything else (but the client's own probes, CLIENT_PROBES) is recorded and answered 404, so an unexpected
call fails the test loudly.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

#: what huggingface_hub asks on its own (agent detection for its user agent); answered 404, not a test failure
CLIENT_PROBES = frozenset({"/api/agent-harnesses"})


def _check_card(content: str) -> list[str]:
    """The few things the Hub checks that matter here: YAML front matter, a license, well-formed configs."""
    if not content.startswith("---\n"):
        return ["README.md has no YAML front matter"]
    try:
        meta = yaml.safe_load(content.split("---\n", 2)[1])
    except yaml.YAMLError as exc:
        return [f"invalid YAML: {exc}"]
    errors = []
    if not isinstance(meta, dict) or "license" not in meta:
        errors.append("license is missing")
    for config in (meta or {}).get("configs", []):
        for entry in config.get("data_files", []):
            if not {"split", "path"} <= set(entry):
                errors.append("configs.data_files entries need split and path")
    return errors


def _git_oid(blob: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(blob) + blob).hexdigest()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client that hangs up on a kept-alive connection is normal; anything else is still printed."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}  # repo id -> create request body, plus "private"
        self.files: dict[str, dict[str, bytes]] = {}
        self.commits: dict[str, list[str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.unexpected: list[str] = []
        self.validated: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _reply(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has no body: one written here would open the next answer
                    self.wfile.write(data)

            def _not_found(self, what: str = "Repository not found") -> None:
                self._reply(404, {"error": what}, {"X-Error-Code": "RepoNotFound", "X-Error-Message": what})

            def _readable(self, repo_id: str) -> bool:
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return False
                return not repo["private"] or self.headers.get("Authorization", "").startswith("Bearer ")

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))

            def do_POST(self) -> None:
                raw = self._body()
                path = urllib.parse.urlsplit(self.path).path
                hub.calls.append(("POST", path))
                parts = path.strip("/").split("/")
                if path == "/api/repos/create":
                    body = json.loads(raw)
                    repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
                    url = f"http://{self.headers['Host']}/datasets/{repo_id}"
                    if repo_id in hub.repos:
                        return self._reply(409, {"error": "You already created this dataset repo", "url": url})
                    private = bool(body.get("private")) or body.get("visibility") == "private"
                    hub.make_repo(repo_id, private=private, body=body)
                    return self._reply(200, {"url": url})
                if path == "/api/validate-yaml":
                    body = json.loads(raw)
                    hub.validated.append(body["content"])
                    errors = _check_card(body["content"])
                    return self._reply(
                        400 if errors else 200, {"errors": [{"message": e} for e in errors], "warnings": []}
                    )
                if len(parts) >= 6 and parts[:2] == ["api", "datasets"]:
                    repo_id = f"{parts[2]}/{parts[3]}"
                    if parts[4] == "preupload":
                        files = json.loads(raw)["files"]
                        return self._reply(
                            200,
                            {
                                "files": [
                                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                                    for f in files
                                ]
                            },
                        )
                    if parts[4] == "commit":
                        return self._commit(repo_id, raw)
                    if parts[4] == "paths-info":
                        if not self._readable(repo_id):
                            return self._not_found()
                        form = urllib.parse.parse_qs(raw.decode())
                        wanted = form.get("paths", [])
                        return self._reply(200, [e for e in hub.entries(repo_id) if e["path"] in wanted])
                hub.unexpected.append(f"POST {path}")
                return self._not_found("not here")

            def _commit(self, repo_id: str, raw: bytes) -> None:
                files = hub.files.setdefault(repo_id, {})
                for line in raw.splitlines():
                    item = json.loads(line)
                    value = item["value"]
                    if item["key"] == "file":
                        assert value["encoding"] == "base64"
                        files[value["path"]] = base64.b64decode(value["content"])
                    elif item["key"] == "deletedFile":
                        files.pop(value["path"], None)
                    elif item["key"] == "deletedFolder":
                        for name in [n for n in files if n.startswith(value["path"].rstrip("/") + "/")]:
                            files.pop(name)
                    elif item["key"] != "header":
                        hub.unexpected.append(f"commit line {item['key']}")
                oid = hub.new_commit(repo_id)
                self._reply(
                    200,
                    {"commitUrl": f"http://{self.headers['Host']}/datasets/{repo_id}/commit/{oid}", "commitOid": oid},
                )

            def do_PUT(self) -> None:
                raw = self._body()
                path = urllib.parse.urlsplit(self.path).path
                hub.calls.append(("PUT", path))
                parts = path.strip("/").split("/")
                if len(parts) == 5 and parts[:2] == ["api", "datasets"] and parts[4] == "settings":
                    repo_id = f"{parts[2]}/{parts[3]}"
                    if repo_id not in hub.repos:
                        return self._not_found()
                    body = json.loads(raw or b"{}")
                    if "private" in body or "visibility" in body:
                        hub.repos[repo_id]["private"] = bool(body.get("private")) or body.get("visibility") == "private"
                    return self._reply(200, {})
                hub.unexpected.append(f"PUT {path}")
                return self._not_found("not here")

            def do_HEAD(self) -> None:
                self._get(head=True)

            def do_GET(self) -> None:
                self._get(head=False)

            def _get(self, head: bool) -> None:
                split = urllib.parse.urlsplit(self.path)
                path, query = urllib.parse.unquote(split.path), urllib.parse.parse_qs(split.query)
                hub.calls.append(("HEAD" if head else "GET", self.path))
                if path in CLIENT_PROBES:
                    return self._not_found("not here")
                parts = path.strip("/").split("/")
                if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
                    return self._resolve(f"{parts[1]}/{parts[2]}", "/".join(parts[5:]), head)
                if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
                    repo_id = f"{parts[2]}/{parts[3]}"
                    if not self._readable(repo_id):
                        return self._not_found()
                    if len(parts) == 4 or (len(parts) >= 6 and parts[4] == "revision"):
                        return self._reply(200, hub.info(repo_id))
                    if len(parts) >= 6 and parts[4] == "tree":
                        under = "/".join(parts[6:]).strip("/")
                        recursive = query.get("recursive", ["false"])[0].lower() == "true"
                        return self._reply(200, hub.tree(repo_id, under, recursive))
                hub.unexpected.append(f"{'HEAD' if head else 'GET'} {self.path}")
                return self._not_found("not here")

            def _resolve(self, repo_id: str, name: str, head: bool) -> None:
                if not self._readable(repo_id):
                    return self._not_found()
                blob = hub.files[repo_id].get(name)
                if blob is None:
                    return self._reply(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(blob)))
                self.send_header("ETag", f'"{_git_oid(blob)}"')
                self.send_header("X-Repo-Commit", hub.commits[repo_id][-1])
                self.end_headers()
                if not head:
                    self.wfile.write(blob)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- state, also for tests that set a repository up by hand ------------------------------------

    def make_repo(
        self, repo_id: str, *, private: bool = False, files: dict[str, bytes] | None = None, body: dict | None = None
    ) -> None:
        """A repository as if someone had created it (and committed ``files``) before the test."""
        self.repos[repo_id] = {**(body or {"type": "dataset"}), "private": private}
        self.files[repo_id] = dict(files or {})
        self.commits[repo_id] = []
        self.new_commit(repo_id)

    def new_commit(self, repo_id: str) -> str:
        history = self.commits.setdefault(repo_id, [])
        oid = hashlib.sha1(f"{repo_id}:{len(history)}".encode()).hexdigest()
        history.append(oid)
        return oid

    def entries(self, repo_id: str) -> list[dict]:
        files = self.files.get(repo_id, {})
        folders = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        out = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in folders]
        out += [{"type": "file", "oid": _git_oid(b), "size": len(b), "path": p} for p, b in sorted(files.items())]
        return out

    def tree(self, repo_id: str, under: str, recursive: bool) -> list[dict]:
        prefix = f"{under}/" if under else ""
        found = [e for e in self.entries(repo_id) if e["path"].startswith(prefix) and e["path"] != under]
        return found if recursive else [e for e in found if "/" not in e["path"][len(prefix) :]]

    def info(self, repo_id: str) -> dict:
        return {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": self.commits[repo_id][-1],
            "private": self.repos[repo_id]["private"],
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": p} for p in sorted(self.files.get(repo_id, {}))],
        }

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

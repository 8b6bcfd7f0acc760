"""A tiny Hugging Face Hub on 127.0.0.1: the endpoints `create_repo` + `upload_folder` use (huggingface_hub 2.4).

POST /api/repos/create                         -> {"url": ...}
POST /api/validate-yaml                        -> the card's YAML front matter parsed and checked (400 if bad)
POST /api/datasets/<ns>/<name>/preupload/<rev> -> every file "regular" (so no LFS/xet transfer is needed)
POST /api/datasets/<ns>/<name>/commit/<rev>    -> NDJSON: header + one base64 "file" line per file
Anything else is recorded and answered 404, so an unexpected call fails the test loudly.
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml


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


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}
        self.files: dict[str, dict[str, bytes]] = {}
        self.calls: list[tuple[str, str]] = []
        self.unexpected: list[str] = []
        self.validated: list[str] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = self.path.split("?")[0]
                hub.calls.append(("POST", path))
                parts = path.strip("/").split("/")
                if path == "/api/repos/create":
                    body = json.loads(raw)
                    repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
                    hub.repos[repo_id] = body
                    hub.files.setdefault(repo_id, {})
                    return self._reply(200, {"url": f"http://{self.headers['Host']}/datasets/{repo_id}"})
                if path == "/api/validate-yaml":
                    body = json.loads(raw)
                    hub.validated.append(body["content"])
                    errors = _check_card(body["content"])
                    return self._reply(400 if errors else 200, {"errors": [{"message": e} for e in errors], "warnings": []})
                if len(parts) >= 6 and parts[:2] == ["api", "datasets"] and parts[4] == "preupload":
                    files = json.loads(raw)["files"]
                    return self._reply(200, {"files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None} for f in files]})
                if len(parts) >= 6 and parts[:2] == ["api", "datasets"] and parts[4] == "commit":
                    repo_id = f"{parts[2]}/{parts[3]}"
                    for line in raw.splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            value = item["value"]
                            assert value["encoding"] == "base64"
                            hub.files[repo_id][value["path"]] = base64.b64decode(value["content"])
                        elif item["key"] != "header":
                            hub.unexpected.append(f"commit line {item['key']}")
                    return self._reply(200, {"commitUrl": f"http://{self.headers['Host']}/datasets/{repo_id}/commit/abc",
                                             "commitOid": "a" * 40})
                hub.unexpected.append(f"POST {path}")
                return self._reply(404, {"error": "not here"})

            def do_GET(self) -> None:
                hub.calls.append(("GET", self.path))
                hub.unexpected.append(f"GET {self.path}")
                self._reply(404, {"error": "not here"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeHub":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

"""A fake Hugging Face Hub on 127.0.0.1: just enough of the Hub's HTTP API for `snapshot_download`.

Why it exists: models.fetch_snapshot downloads Hub ids on first use, and the tests must run that real code
(huggingface_hub's HTTP calls, its cache layout, the allow patterns) on machines without network. Pointing
HF_ENDPOINT at this server makes huggingface_hub talk to it instead of huggingface.co.

What huggingface_hub 2.x asks, and what is answered (each repository is a local folder):

- GET  /api/models/{repo_id}/revision/{revision}   HfApi.repo_info: {"id", "sha", "siblings"}; `sha` is the
  commit every later request names as its revision. /api/models/{repo_id}: the same for `main`.
- GET  /api/models/{repo_id}/tree/{revision}        HfApi.list_repo_tree (recursive): one entry per file.
- HEAD /{repo_id}/resolve/{revision}/{filename}    get_hf_file_metadata: X-Repo-Commit, ETag (the blob's
  name in the cache), Content-Length (the size the download is checked against).
- GET  /{repo_id}/resolve/{revision}/{filename}    the bytes (a `Range: bytes=N-` resume is honoured).

Errors come as the Hub sends them, with the X-Error-Code that hf_raise_for_status turns into its exception:
RepoNotFound (an unknown repository), RevisionNotFound (a revision other than `main` or the commit),
EntryNotFound (a file the repository lacks). Every request is recorded, so a test can tell that an offline
run asked nothing, or which files a download fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote, urlsplit

# `.+?`: a repository id has one slash (org/name) or none; the first `/revision/`, `/tree/` or
# `/resolve/` after it ends it.
_INFO = re.compile(r"/api/models/(?P<repo>.+?)/revision/(?P<rev>[^/]+)")
_INFO_MAIN = re.compile(r"/api/models/(?P<repo>[^/]+(?:/[^/]+)?)")  # repo_info without a revision
_TREE = re.compile(r"/api/models/(?P<repo>.+?)/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?")
_RESOLVE = re.compile(r"/(?P<repo>.+?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)")


@dataclass(frozen=True)
class Request:
    """One request the fake Hub received."""

    method: str  # GET | HEAD
    path: str  # without the query string, percent-decoded


@dataclass(frozen=True)
class _File:
    data: bytes
    sha256: str  # the ETag: the Hub gives an LFS file's sha256, and the cache names the blob by it
    git_oid: str  # the tree listing's `oid` (git blob sha1), as the Hub lists it


@dataclass(frozen=True)
class _Repo:
    files: dict[str, _File]  # path in the repository ('/'-separated) -> content
    sha: str  # commit hash: 40 hex digits, derived from the content (same folder, same commit)


def _read_repo(folder: Path) -> _Repo:
    files: dict[str, _File] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        files[path.relative_to(folder).as_posix()] = _File(data, hashlib.sha256(data).hexdigest(), oid)
    commit = hashlib.sha1("".join(f"{name}:{f.git_oid}\n" for name, f in files.items()).encode()).hexdigest()
    return _Repo(files=files, sha=commit)


class FakeHub:
    """`with FakeHub({"org/tiny": folder}) as hub:` serves each folder as a model repository at hub.url.

    The folders are read once, when the server starts: their content is the repository's one commit.
    """

    def __init__(self, repos: Mapping[str, Path]) -> None:
        self._folders = dict(repos)
        self._repos: dict[str, _Repo] = {}
        self._requests: list[Request] = []
        self._lock = threading.Lock()  # the server answers each request on its own thread
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint to set as HF_ENDPOINT."""
        if self._server is None:
            raise RuntimeError("the fake Hub is not running: use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Request]:
        """Every request so far, in the order received."""
        with self._lock:
            return list(self._requests)

    def downloaded(self, repo_id: str) -> list[str]:
        """The files of `repo_id` whose bytes were fetched (GET, not HEAD), sorted; a file fetched twice is
        listed twice (a cached file must not be downloaded again)."""
        prefix = f"/{repo_id}/resolve/"
        return sorted(
            r.path.removeprefix(prefix).split("/", 1)[1]
            for r in self.requests
            if r.method == "GET" and r.path.startswith(prefix)
        )

    def commit(self, repo_id: str) -> str:
        """The commit hash of `repo_id` (the snapshot folder's name in the Hugging Face cache)."""
        return self._repos[repo_id].sha

    def forget(self) -> None:
        """Clear the recorded requests (before a run whose requests a test counts)."""
        with self._lock:
            self._requests.clear()

    def __enter__(self) -> FakeHub:
        self._repos = {repo_id: _read_repo(folder) for repo_id, folder in self._folders.items()}
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def _record(self, method: str, path: str) -> None:
        with self._lock:
            self._requests.append(Request(method, path))


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub  # set on the subclass FakeHub.__enter__ makes

    def log_message(self, format: str, *args: object) -> None:
        pass  # the requests are recorded; stderr noise would end up in every captured test report

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        self.fake._record(self.command, path)
        if (m := _INFO.fullmatch(path)) or (m := _INFO_MAIN.fullmatch(path)):
            repo = self._repo(m["repo"], m.groupdict().get("rev") or "main")
            if repo is not None:
                siblings = [{"rfilename": name} for name in repo.files]
                self._json({"id": m["repo"], "sha": repo.sha, "siblings": siblings, "private": False}, head)
        elif m := _TREE.fullmatch(path):
            repo = self._repo(m["repo"], m["rev"])
            if repo is not None:
                sub = (m["sub"] or "").strip("/")
                entries = [
                    {"type": "file", "path": name, "size": len(f.data), "oid": f.git_oid}
                    for name, f in repo.files.items()
                    if not sub or name.startswith(sub + "/")
                ]
                self._json(entries, head)
        elif m := _RESOLVE.fullmatch(path):
            repo = self._repo(m["repo"], m["rev"])
            if repo is not None:
                self._file(repo, m["file"], head)
        else:
            self._error(404, "", "Not Found", head)

    def _repo(self, repo_id: str, revision: str) -> _Repo | None:
        """The repository at this revision, or None after answering the Hub's 404."""
        repo = self.fake._repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head=self.command == "HEAD")
            return None
        if revision not in ("main", repo.sha):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head=self.command == "HEAD")
            return None
        return repo

    def _file(self, repo: _Repo, name: str, head: bool) -> None:
        found = repo.files.get(name)
        if found is None:
            self._error(404, "EntryNotFound", f"{name} does not exist", head, commit=repo.sha)
            return
        data, status = found.data, 200
        start = _range_start(self.headers.get("Range"))
        if start is not None and not head and 0 < start < len(data):
            data, status = data[start:], 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data) if status == 206 else len(found.data)))
        self.send_header("ETag", f'"{found.sha256}"')
        self.send_header("X-Repo-Commit", repo.sha)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(found.data) - 1}/{len(found.data)}")
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _json(self, document: object, head: bool) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, head: bool, commit: str | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit is not None:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _range_start(header: str | None) -> int | None:
    """N of `bytes=N-` (the only form huggingface_hub sends, to resume a download), else None."""
    m = re.fullmatch(r"bytes=(\d+)-", header or "")
    return int(m[1]) if m else None

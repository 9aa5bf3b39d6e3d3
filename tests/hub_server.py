#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub, for tests/cli_pull.sh (loopback only).

Serves ROOT/OWNER/REPO/FILE as the hub does:
  GET  /api/models/OWNER/REPO            JSON with the revision ("sha") and "siblings"[].rfilename
  HEAD|GET /OWNER/REPO/resolve/REV/FILE  302 to /blobs/<sha256> with X-Linked-Etag ("<sha256>"),
                                          X-Linked-Size and X-Repo-Commit, as the hub answers for LFS files
  GET  /blobs/<sha256>                   the bytes, honouring "Range: bytes=N-" with a 206
Switches: --token T (401 without "Authorization: Bearer T"), --drop-once (the first
blob reply announces the whole length, sends half and closes the connection),
--corrupt (every blob reply has one byte flipped), --hold-until FILE (the first
blob reply sends half, then waits up to 60 s for FILE to exist before the rest),
--cert/--key (HTTPS).
Every request is logged as one JSON line (method, path, range) to --log.
Prints the port on stdout once listening.
"""
import argparse
import hashlib
import http.server
import json
import os
import ssl
import sys
import threading
import time


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--token", default="")
    p.add_argument("--drop-once", action="store_true")
    p.add_argument("--corrupt", action="store_true")
    p.add_argument("--hold-until", default="")
    p.add_argument("--cert", default="")
    p.add_argument("--key", default="")
    return p.parse_args()


ARGS = parse_args()
LOCK = threading.Lock()
STATE = {"dropped": False, "held": False}
BLOBS = {}  # sha256 -> path, filled as files are announced


def revision(repo):
    return hashlib.sha1(repo.encode()).hexdigest()


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def repo_files(repo_dir):
    out = []
    for base, _, files in os.walk(repo_dir):
        for name in files:
            out.append(os.path.relpath(os.path.join(base, name), repo_dir))
    return sorted(out)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self):
        with LOCK, open(ARGS.log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "range": self.headers.get("Range"),
                                "auth": self.headers.get("Authorization") is not None}) + "\n")

    def reply(self, status, body=b"", headers=None, send_body=True):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body and body:
            self.wfile.write(body)

    def error(self, status, code, message, send_body=True):
        body = json.dumps({"error": message}).encode()
        self.reply(status, body, {"Content-Type": "application/json", "X-Error-Code": code}, send_body)

    def authorized(self, send_body=True):
        if not ARGS.token or self.headers.get("Authorization") == "Bearer " + ARGS.token:
            return True
        self.error(401, "GatedRepo", "Access to this model is restricted", send_body)
        return False

    def repo_dir(self, owner, repo):
        d = os.path.join(ARGS.root, owner, repo)
        return d if os.path.isdir(d) and ".." not in (owner, repo) else None

    def do_HEAD(self):
        self.handle_request(send_body=False)

    def do_GET(self):
        self.handle_request(send_body=True)

    def handle_request(self, send_body):
        self.record()
        path = self.path.split("?", 1)[0]
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[:2] == ["api", "models"]:
            return self.api(parts[2], parts[3], send_body)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(parts[0], parts[1], parts[3], "/".join(parts[4:]), send_body)
        if len(parts) == 2 and parts[0] == "blobs":
            return self.blob(parts[1], send_body)
        self.error(404, "NotFound", "no such route", send_body)

    def api(self, owner, repo, send_body):
        if not self.authorized(send_body):
            return
        d = self.repo_dir(owner, repo)
        if d is None:
            return self.error(404, "RepoNotFound", "Repository not found", send_body)
        name = owner + "/" + repo
        body = json.dumps({"id": name, "modelId": name, "sha": revision(name),
                           "siblings": [{"rfilename": f} for f in repo_files(d)]}).encode()
        self.reply(200, body, {"Content-Type": "application/json"}, send_body)

    def resolve(self, owner, repo, rev, file, send_body):
        if not self.authorized(send_body):
            return
        d = self.repo_dir(owner, repo)
        name = owner + "/" + repo
        if d is None:
            return self.error(404, "RepoNotFound", "Repository not found", send_body)
        if rev not in ("main", revision(name)):
            return self.error(404, "RevisionNotFound", "Invalid rev id", send_body)
        path = os.path.join(d, file)
        if ".." in file.split("/") or not os.path.isfile(path):
            return self.error(404, "EntryNotFound", "Entry not found", send_body)
        sha = sha256_of(path)
        BLOBS[sha] = path
        scheme = "https" if ARGS.cert else "http"
        host = self.headers.get("Host")
        self.reply(302, b"", {"Location": "%s://%s/blobs/%s" % (scheme, host, sha),
                              "X-Linked-Etag": '"%s"' % sha,
                              "X-Linked-Size": str(os.path.getsize(path)),
                              "X-Repo-Commit": revision(name),
                              "ETag": '"%s"' % hashlib.sha1(path.encode()).hexdigest()}, send_body)

    def blob(self, sha, send_body):
        path = BLOBS.get(sha)
        if path is None:
            return self.error(404, "NotFound", "no such blob", send_body)
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if ARGS.corrupt:
            data[len(data) // 2] ^= 0xFF
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % len(data)}, send_body)
        part = bytes(data[start:])
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(part)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if not send_body:
            return
        with LOCK:
            drop = ARGS.drop_once and not STATE["dropped"]
            STATE["dropped"] = STATE["dropped"] or drop
        with LOCK:
            hold = bool(ARGS.hold_until) and not STATE["held"]
            STATE["held"] = STATE["held"] or hold
        if hold:
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            for _ in range(600):
                if os.path.exists(ARGS.hold_until):
                    break
                time.sleep(0.1)
            try:
                self.wfile.write(part[len(part) // 2 :])
            except OSError:  # the client gave up (its disk filled)
                pass
            return
        if drop:
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(part)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()

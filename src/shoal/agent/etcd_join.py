"""`shoal-agent etcd-join`: a master's etcd member joins its cluster's running etcd,
then becomes etcd (exec, so the supervisor's process is etcd itself).

    shoal-agent etcd-join --name N --data-dir D --peer-url URL --endpoints URL,...
                          --masters NAME=PEER_URL,... --cert C --key K --ca CA -- etcd ...

- A data dir from an earlier start: run etcd at once (it knows its cluster).
- Else, through the first of `--endpoints` that answers (etcd's JSON gateway over TLS,
  this master's certificate as the client's): remove every member that has started
  once under a name and peer URL no master of `--masters` has, and whose peer port no
  longer answers (a lost or replaced master, also one whose address this master now
  has); add this member unless it is listed; run etcd
  with every member as `--initial-cluster` and `--initial-cluster-state=existing`.
- etcd refuses an add that would leave too few started members for a quorum (another
  master joined a moment ago and is not up yet): wait and try again. Gives up after
  `--timeout` seconds (exit 1); the supervisor then starts it again.

Standard library only, like the rest of the agent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    peer_urls: tuple[str, ...]

    @classmethod
    def from_json(cls, m: dict[str, Any]) -> Member:
        return cls(str(m.get("ID", "")), str(m.get("name", "")), tuple(m.get("peerURLs") or ()))


class Unanswered(Exception):
    """No endpoint answered, or etcd refused the change for now."""


class Gateway:
    """etcd's v3 JSON gateway on one of several endpoints, over TLS with a client
    certificate."""

    def __init__(self, endpoints: Sequence[str], cert: str, key: str, ca: str) -> None:
        self.endpoints = list(endpoints)
        self.tls = ssl.create_default_context(cafile=ca)
        self.tls.load_cert_chain(cert, key)
        self.tls.check_hostname = False  # the CA is the cluster's; peers are named by IP

    def call(self, path: str, body: dict[str, Any], endpoint: str) -> dict[str, Any]:
        req = urllib.request.Request(
            endpoint + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=3, context=self.tls) as resp:
                out: dict[str, Any] = json.loads(resp.read() or b"{}")
                return out
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise Unanswered(f"{endpoint}{path}: {exc.code} {detail}") from exc
        except (OSError, ValueError) as exc:
            raise Unanswered(f"{endpoint}{path}: {exc}") from exc

    def members(self) -> tuple[str, list[Member]]:
        """(the endpoint that answered, the cluster's members)."""
        errors = []
        for endpoint in self.endpoints:
            try:
                got = self.call("/v3/cluster/member/list", {}, endpoint)
            except Unanswered as exc:
                errors.append(str(exc))
                continue
            return endpoint, [Member.from_json(m) for m in got.get("members", [])]
        raise Unanswered("; ".join(errors) or "no endpoint to ask")


def peer_answers(url: str, timeout: float = 2.0) -> bool:
    """Whether something accepts connections on a peer URL's host and port."""
    u = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((u.hostname or "", u.port or 2380), timeout=timeout):
            return True
    except OSError:
        return False


def stale(members: Sequence[Member], masters: dict[str, str], name: str) -> list[Member]:
    """Members no master owns any more: started once (named), not this one, and no
    master of the plan has both their name and their peer URL. That includes a lost
    master whose address this one now has: joining as it would take its member's
    place and its log position, which this empty data dir does not have. (Whether
    they still answer is asked apart.)"""
    return [
        m
        for m in members
        if m.name and m.name != name and not any(masters.get(m.name) == u for u in m.peer_urls)
    ]


def initial_cluster(
    members: Sequence[Member], name: str, own_peer: str, masters: dict[str, str]
) -> str:
    """`--initial-cluster` for a member joining `members` (itself among them): each
    member by its name, or, not started yet, by the master that owns its peer URL."""
    by_url = {url: n for n, url in masters.items()}
    parts = []
    for m in members:
        for url in m.peer_urls:
            n = name if url == own_peer else (m.name or by_url.get(url) or f"member-{m.id}")
            parts.append(f"{n}={url}")
    return ",".join(parts)


def join(args: argparse.Namespace, gateway: Gateway) -> str:
    """One try: the `--initial-cluster` this member starts with, once it is listed."""
    masters = dict(pair.split("=", 1) for pair in args.masters.split(",") if pair)
    endpoint, members = gateway.members()
    removed = []
    for m in stale(members, masters, args.name):
        if not any(peer_answers(u) for u in m.peer_urls):
            gateway.call("/v3/cluster/member/remove", {"ID": m.id}, endpoint)
            print(f"etcd-join: removed member {m.name} ({', '.join(m.peer_urls)})", flush=True)
            removed.append(m.id)
    members = [m for m in members if m.id not in removed]
    if not any(args.peer_url in m.peer_urls for m in members):
        gateway.call("/v3/cluster/member/add", {"peerURLs": [args.peer_url]}, endpoint)
        print(f"etcd-join: added {args.name} ({args.peer_url}) through {endpoint}", flush=True)
    _, members = gateway.members()
    if not any(args.peer_url in m.peer_urls for m in members):
        raise Unanswered(f"{args.peer_url} is not listed after its add")
    return initial_cluster(members, args.name, args.peer_url, masters)


def has_data(data_dir: Path) -> bool:
    """Whether an earlier start left a write-ahead log (a member that failed before
    writing one leaves an empty member dir: it joins again)."""
    wal = data_dir / "member" / "wal"
    return wal.is_dir() and any(wal.iterdir())


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    etcd = argv[cut + 1 :]
    parser = argparse.ArgumentParser(prog="shoal-agent etcd-join", description=__doc__)
    parser.add_argument("--name", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--peer-url", required=True)
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--masters", default="")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=2.0)
    args = parser.parse_args(argv[:cut])
    if not etcd:
        print("etcd-join: no etcd command after --", file=sys.stderr)
        return 2
    if shutil.which(etcd[0]) is None and "/" not in etcd[0]:
        print(f"etcd-join: {etcd[0]} is not on the PATH", file=sys.stderr)
        return 127
    if has_data(Path(args.data_dir)):
        os.execvp(etcd[0], etcd)
    gateway = Gateway([e for e in args.endpoints.split(",") if e], args.cert, args.key, args.ca)
    deadline = time.monotonic() + args.timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            cluster = join(args, gateway)
        except Unanswered as exc:
            if str(exc) != last:
                print(f"etcd-join: not yet: {exc}", flush=True)
                last = str(exc)
            time.sleep(args.every)
            continue
        print(f"etcd-join: starting with --initial-cluster={cluster}", flush=True)
        os.execvp(
            etcd[0], [*etcd, f"--initial-cluster={cluster}", "--initial-cluster-state=existing"]
        )
    print(f"etcd-join: gave up after {args.timeout:.0f}s: {last}", file=sys.stderr)
    return 1

"""``kefu keys``: create, list and revoke API keys where the server looks them up:
``keys.db`` in the data dir, or Redis with ``--redis`` (every replica then sees them)."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kefu.auth.keys import ApiKey, KeyStore, SqliteKeyStore, new_key
from kefu.auth.principal import DEFAULT_SCOPES, SCOPES
from kefu.commands.data_dir import chosen_data_dir, data_dir_option
from kefu.commands.guard import guarded
from kefu.limits.rate import Rate
from kefu.settings import load_settings

T = TypeVar("T")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "keys",
        help="create, list and revoke API keys (--auth keys)",
        description="API keys are stored as hashes: a new key is printed once, as the last "
        "line of `kefu keys create`, and cannot be shown again.",
    )
    keys = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    where = data_dir_option()
    where.add_argument(
        "--redis",
        default=None,
        metavar="URL",
        help="keep keys in this Redis, as replicas started with --redis do "
        "(default: the redis setting, env KEFU_REDIS; else keys.db in the data dir)",
    )
    create = keys.add_parser("create", parents=[where], help="make a key; prints it once")
    create.add_argument("--name", required=True, help="who or what the key is for")
    create.add_argument(
        "--rate-limit",
        metavar="N/SECONDS",
        help="this key's token bucket (default: the server's --rate-limit); 'off' for none",
    )
    create.add_argument(
        "--max-streams", type=int, metavar="N", help="answers at once (default: the server's)"
    )
    create.add_argument(
        "--scope",
        action="append",
        metavar="SCOPE",
        help=f"one of {', '.join(SCOPES)} (repeat or comma-separate; default: "
        f"{' '.join(DEFAULT_SCOPES)}): chat = POST /chat and its sessions (a web shop's "
        "publishable key), api = /v1 and reading the knowledge base, admin = everything, "
        "the agent desk included",
    )
    create.set_defaults(run=guarded("keys", ValueError)(run_create))
    listing = keys.add_parser("list", parents=[where], help="the keys, without their secrets")
    listing.add_argument("--json", action="store_true", help="one JSON object per key")
    listing.set_defaults(run=guarded("keys", ValueError)(run_list))
    revoke = keys.add_parser("revoke", parents=[where], help="stop a key from working")
    revoke.add_argument("id", metavar="ID", help="the key's id (from kefu keys list)")
    revoke.set_defaults(run=guarded("keys", ValueError)(run_revoke))


def _with_store(args: argparse.Namespace, work: Callable[[KeyStore], Awaitable[T]]) -> T:
    url = args.redis or load_settings().redis

    async def run() -> T:
        if url is None:
            return await work(SqliteKeyStore(chosen_data_dir(args) / "keys.db"))
        from kefu.shared.client import RedisClient
        from kefu.shared.keys import RedisKeyStore

        client = RedisClient(url, pool_size=2, timeout=5.0)
        try:
            return await work(RedisKeyStore(client))
        finally:
            await client.close()

    return asyncio.run(run())


def run_create(args: argparse.Namespace) -> int:
    scopes = tuple(s.strip() for given in args.scope or [] for s in given.split(",") if s.strip())
    scopes = scopes or DEFAULT_SCOPES
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope {', '.join(unknown)}: use {', '.join(SCOPES)}")
    if args.rate_limit is not None:
        Rate.parse(args.rate_limit)  # its ValueError says what is wrong
    if args.max_streams is not None and args.max_streams < 0:
        raise ValueError("--max-streams must be 0 (no cap) or more")
    key, record = new_key(args.name, scopes, args.rate_limit, args.max_streams)
    _with_store(args, lambda store: store.add(record))
    print(f"created key {record.id} ({record.name}; scopes {' '.join(record.scopes)})")
    print("the key is shown once, here; keep it secret:", file=sys.stderr)
    print(key)
    return 0


def run_list(args: argparse.Namespace) -> int:
    records: list[ApiKey] = _with_store(args, lambda store: store.all())
    for record in records:
        shown = {k: v for k, v in json.loads(record.to_json()).items() if k != "hash"}
        if args.json:
            print(json.dumps(shown))
            continue
        status = "revoked" if record.revoked_at else "active"
        created = datetime.datetime.fromtimestamp(record.created_at, datetime.UTC)
        print(
            f"{record.id}  {status:7}  {created:%Y-%m-%d %H:%M}  {' '.join(record.scopes):15}  "
            f"rate {record.rate_limit or 'default'}  streams "
            f"{'default' if record.max_streams is None else record.max_streams}  {record.name}"
        )
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    if not _with_store(args, lambda store: store.revoke(args.id)):
        raise ValueError(f"no active key {args.id!r} (see kefu keys list)")
    print(f"revoked key {args.id}; every server stops taking it within a second")
    return 0

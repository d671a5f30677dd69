"""`sag2wb judge-server`: serve a workbench judge over the JEV (Noul) HTTP interface."""

from __future__ import annotations

import sys

from workbench import safeio
from workbench.cli.io_roles import path_option
from workbench.cli.options import number
from workbench.judges.jev.server import SERVED_JUDGES, build_server
from workbench.judges.registry import server_judge_help


def add_parser(sub) -> None:
    p = sub.add_parser("judge-server", help="serve a workbench judge over the Noul-compatible HTTP interface")
    p.add_argument("--judge", default="lexical", help=server_judge_help(SERVED_JUDGES))
    path_option(p, "--db", role="input", default=None, help="the index, for the judges that read one")
    p.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)"
    )
    p.add_argument(
        "--port", type=number(int, minimum=0, maximum=65535), default=8765, help="the port (default 8765; 0: any free)"
    )
    p.add_argument(
        "--delay-ms",
        type=number(float, minimum=0, maximum=3_600_000),
        default=0.0,
        help="answer every request this many milliseconds later (default 0)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:SECONDS][xTIMES]",
        help="inject a fault into the next requests, e.g. 429:1, 500x5, slow:3, malformed (see docs/jev.md)",
    )
    p.add_argument(
        "--max-body-mb",
        type=number(float, above=0, maximum=4096),
        default=16.0,
        help="larger request bodies get 413 (default 16)",
    )
    p.add_argument(
        "--read-timeout",
        type=number(float, above=0, maximum=86400),
        default=30.0,
        help="seconds a client may take to send a whole request, headers and body, however slowly it "
        "trickles (408 after); also how long a keep-alive connection may idle (default 30)",
    )
    p.add_argument(
        "--judge-timeout",
        default=None,
        help="seconds per judge call (default $SAG2WB_JUDGE_TIMEOUT or 60; 0: none)",
    )
    p.set_defaults(func=cmd_judge_server)


def cmd_judge_server(args) -> int:
    """`sag2wb judge-server`: serve until interrupted (Ctrl-C: "stopped", exit 0)."""
    server = build_server(
        args.judge,
        args.db,
        host=args.host,
        port=args.port,
        delay_ms=args.delay_ms,
        faults=args.fault,
        max_body_mb=args.max_body_mb,
        read_timeout=args.read_timeout,
        judge_timeout=args.judge_timeout,
    )
    print(
        f"serving judge {getattr(server.judge, 'name', args.judge)!r} at {server.url} "
        f"(any path; use --jev-endpoint {server.url})",
        flush=True,
    )
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.httpd.server_close()
    return safeio.EXIT_OK

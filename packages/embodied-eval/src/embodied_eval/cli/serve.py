"""``embodied serve CHECKPOINT``: serve a policy over openpi's websocket protocol (``--help`` imports no torch)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from embodied_eval.server import PolicyServer

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``embodied serve``."""
    parser = argparse.ArgumentParser(
        prog="embodied serve",
        description="Serve a checkpoint to robots and simulators over openpi's websocket + msgpack protocol; "
                    "openpi_client.WebsocketClientPolicy talks to it unchanged.",
        epilog="example: embodied serve outputs/main_job/checkpoints/latest --port 8000 "
               "--obs-key-map image=observation.images.front,state=observation.state,prompt=task")
    parser.add_argument("checkpoint", help="a checkpoint folder of ours (checkpoints/step_N, latest) or an "
                                           "exported policy folder")
    parser.add_argument("--host", default="127.0.0.1",
                        help="interface to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    parser.add_argument("--device", default="cpu", help="inference device, e.g. cpu, cuda, cuda:1 (default cpu)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the policy's noise generator (default 0)")
    parser.add_argument("--embodiment", default=None, metavar="TAG",
                        help="a policy trained on a dataset mixture: the embodiment served by default (its cameras, "
                             "state and statistics); a request may name another under the key 'embodiment' "
                             "(default: the policy's default embodiment)")
    parser.add_argument("--allow-external-references", action="store_true",
                        help="read files the policy folder references outside itself (../ or absolute paths, "
                             "symbolic links, a LoRA base, a large tokenizer, hub ids); refused by default: the "
                             "error lists what would be read")
    parser.add_argument("--api-key", default=None,
                        help="require the header 'Authorization: Api-Key KEY' (openpi_client's api_key=); the key "
                             "shows in the process list: --api-key-file or EMBODIED_SERVE_API_KEY keep it out")
    parser.add_argument("--api-key-file", default=None, metavar="PATH",
                        help="read the API key from the first line of PATH")
    parser.add_argument("--obs-key-map", default=None, metavar="CLIENT=POLICY,...",
                        help="rename client observation keys to the policy's LeRobot keys, e.g. "
                             "image=observation.images.front,state=observation.state,prompt=task; nested "
                             "maps by path: images/cam_high=observation.images.top")
    parser.add_argument("--max-message-bytes", type=int, default=None, metavar="N",
                        help=f"largest request accepted, in bytes (default {DEFAULT_MAX_MESSAGE_BYTES}, 64 MiB); a "
                             "larger one closes its connection with code 1009")
    parser.add_argument("--max-message-mb", type=float, default=None, metavar="MIB",
                        help="the same limit in MiB (--max-message-bytes wins when both are given)")
    parser.add_argument("--max-connections", type=int, default=64, metavar="N",
                        help="open connections at most (default 64); one more is refused with HTTP 503")
    parser.add_argument("--idle-timeout", type=float, default=600.0, metavar="S",
                        help="close a connection that sends no request for S seconds, or does not read its answer "
                             "within S seconds (default 600; 0 never closes idle connections)")
    parser.add_argument("--handshake-timeout", type=float, default=10.0, metavar="S",
                        help="drop a TCP connection that has not completed the websocket handshake after S seconds "
                             "(default 10)")
    return parser


DEFAULT_MAX_MESSAGE_BYTES = 64 * 2**20


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from --api-key, --api-key-file or EMBODIED_SERVE_API_KEY (one of them at most)."""
    import os

    from embodied_core.errors import UsageError

    given = [name for name, value in (("--api-key", args.api_key), ("--api-key-file", args.api_key_file),
                                      ("EMBODIED_SERVE_API_KEY", os.environ.get("EMBODIED_SERVE_API_KEY")))
             if value is not None]
    if len(given) > 1:
        raise UsageError(f"give the API key once: {' and '.join(given)} are both set")
    if args.api_key_file is not None:
        try:
            lines = Path(args.api_key_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--api-key-file {args.api_key_file}: cannot read it ({type(exc).__name__})") from None
        key = lines[0].strip() if lines else ""
        if not key:
            raise UsageError(f"--api-key-file {args.api_key_file}: the first line is empty")
        return key
    key = args.api_key if args.api_key is not None else os.environ.get("EMBODIED_SERVE_API_KEY")
    if key is not None and not key.strip():
        raise UsageError(f"{given[0]} is empty; give a key or leave it out")
    return key


def _check_limits(args: argparse.Namespace) -> int:
    """Checks the limit flags; returns the message limit in bytes."""
    from embodied_core.errors import UsageError

    for flag, value in (("--max-message-bytes", args.max_message_bytes), ("--max-message-mb", args.max_message_mb),
                        ("--max-connections", args.max_connections), ("--handshake-timeout", args.handshake_timeout)):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be > 0 (got {value:g})")
    if args.idle_timeout < 0:
        raise UsageError(f"--idle-timeout must be >= 0 seconds, 0 for never (got {args.idle_timeout:g})")
    if args.max_message_bytes is not None:
        return args.max_message_bytes
    return int(args.max_message_mb * 2**20) if args.max_message_mb is not None else DEFAULT_MAX_MESSAGE_BYTES


def _banner(server: PolicyServer) -> str:
    meta = server.policy.metadata
    height, width, channels = meta.image_shape
    step = f" step {meta.step}" if meta.step is not None else ""
    lines = [
        f"model    {meta.model_name} ({meta.plugin_version}){step} from {meta.checkpoint}",
        f"cameras  {', '.join(meta.camera_keys) or '(none)'}: uint8 {height}x{width}x{channels} (HWC or CHW)",
        f"state    {meta.state_key} [{meta.state_dim}]" + (", task text required" if meta.needs_task else ""),
        f"actions  {meta.action_key} [{meta.action_horizon}, {meta.action_dim}] per request"
        + (f" at {meta.fps:g} fps" if meta.fps else ""),
        f"device   {meta.device}",
        *([f"embodiment {meta.embodiment} (per request: key 'embodiment', one of {', '.join(meta.embodiments)})"]
          if meta.embodiments else []),
        f"key map  {server.key_map.describe()}",
        f"auth     {'Api-Key header required' if server.requires_api_key else 'none'}",
        f"limits   {server.max_connections} connections, idle timeout "
        + (f"{server.idle_timeout_s:g} s" if server.idle_timeout_s else "none"),
        f"serving on {server.url} (health check: http://{server.host}:{server.port}/healthz); SIGTERM stops",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied serve`` with ``argv`` (the arguments after ``serve``); returns the exit code."""
    from embodied_core.errors import UsageError

    args = build_parser().parse_args(list(argv))
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535 (got {args.port})")
    max_message_bytes = _check_limits(args)
    api_key = _api_key(args)

    from embodied_eval.keymap import parse_key_map

    key_map = parse_key_map(args.obs_key_map)  # checked before the (heavy) policy load

    from embodied_core import load_policy
    from embodied_eval.server import PolicyServer

    policy = load_policy(args.checkpoint, device=args.device, seed=args.seed,
                         allow_external_references=args.allow_external_references)
    from embodied_core.policy.embodiments import EmbodimentPolicy

    policy = EmbodimentPolicy(policy, args.embodiment)  # --embodiment, and an 'embodiment' key per request
    server = PolicyServer(policy, host=args.host, port=args.port, api_key=api_key, key_map=key_map,
                          max_message_bytes=max_message_bytes, max_connections=args.max_connections,
                          idle_timeout_s=args.idle_timeout or None, handshake_timeout_s=args.handshake_timeout)
    server.serve_forever(on_ready=lambda s: print(_banner(s), flush=True))
    print("embodied serve: stopped", flush=True)
    return 0

"""``embodied serve CHECKPOINT``: serve a policy over openpi's websocket protocol (``--help`` imports no torch)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
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
    parser.add_argument("--api-key", default=None,
                        help="require the header 'Authorization: Api-Key KEY' (openpi_client's api_key=)")
    parser.add_argument("--obs-key-map", default=None, metavar="CLIENT=POLICY,...",
                        help="rename client observation keys to the policy's LeRobot keys, e.g. "
                             "image=observation.images.front,state=observation.state,prompt=task; nested "
                             "maps by path: images/cam_high=observation.images.top")
    parser.add_argument("--max-message-mb", type=float, default=64.0,
                        help="largest request accepted, in MiB (default 64)")
    return parser


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
        f"key map  {server.key_map.describe()}",
        f"auth     {'Api-Key header required' if server.requires_api_key else 'none'}",
        f"serving on {server.url} (health check: http://{server.host}:{server.port}/healthz); SIGTERM stops",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Runs ``embodied serve`` with ``argv`` (the arguments after ``serve``); returns the exit code."""
    from embodied_core.errors import UsageError

    args = build_parser().parse_args(list(argv))
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535 (got {args.port})")
    if args.max_message_mb <= 0:
        raise UsageError(f"--max-message-mb must be > 0 (got {args.max_message_mb})")

    from embodied_eval.keymap import parse_key_map

    key_map = parse_key_map(args.obs_key_map)  # checked before the (heavy) policy load

    from embodied_core import load_policy
    from embodied_eval.server import PolicyServer

    policy = load_policy(args.checkpoint, device=args.device, seed=args.seed)
    server = PolicyServer(policy, host=args.host, port=args.port, api_key=args.api_key, key_map=key_map,
                          max_message_bytes=int(args.max_message_mb * 2**20))
    server.serve_forever(on_ready=lambda s: print(_banner(s), flush=True))
    print("embodied serve: stopped", flush=True)
    return 0

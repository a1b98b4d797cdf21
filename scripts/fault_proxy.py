"""A fault-injecting HTTP proxy in front of a judge server, for reliability tests.

It listens on a local port and forwards every request to ``--upstream`` (an OpenAI-compatible
server such as vLLM). A share ``--rate`` of ``POST .../completions`` requests gets one fault,
chosen uniformly among ``--faults``:

- ``hang``: read the request, answer nothing for ``--hang-s`` seconds, then close (a hung judge);
- ``http500`` / ``http503``: an error status with a short body;
- ``nonjson``: HTTP 200 with an HTML body;
- ``nologprobs``: HTTP 200 with the upstream's JSON answer stripped of logprobs and text;
- ``reset``: close the connection without an answer (an abortive close);
- ``slow``: forward, but answer ``--slow-s`` seconds late (a correct, slow answer);
- ``oneanswer`` (only when named in ``--faults``; not in the default mix): HTTP 200 with the
  upstream's answer keeping one logprob per position, as a gateway that ignores
  ``logprob_token_ids`` and the choice constraint would answer.

Everything else (``GET /v1/models``, the other 80%) passes through unchanged. The random draws
come from ``--seed``, so a run is reproducible given the same request order. Counts of injected
faults by kind are written to ``--stats`` (JSON) on every fault, for the test to read.

Data flow: client socket -> minimal HTTP/1.1 parser (asyncio streams) -> fault draw -> httpx
upstream call -> response written back; one request per connection (``Connection: close``).

Usage: ``python scripts/fault_proxy.py --upstream http://127.0.0.1:8765 --port 8799``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from pathlib import Path

import httpx

FAULTS = ("hang", "http500", "http503", "nonjson", "nologprobs", "reset", "slow")
EXTRA_FAULTS = ("oneanswer",)  # not in the default mix, so seeded runs of the default mix stay as they were


class FaultProxy:
    def __init__(self, upstream: str, *, rate: float = 0.2, faults: tuple[str, ...] = FAULTS, seed: int = 0,
                 hang_s: float = 300.0, slow_s: float = 2.0, stats: Path | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rate, self.faults, self.rng = rate, faults, random.Random(seed)
        self.hang_s, self.slow_s, self.stats_path = hang_s, slow_s, stats
        self.counts = {"requests": 0, "faults": 0, **dict.fromkeys(faults, 0)}
        self.client = httpx.AsyncClient(timeout=600.0)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            size = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
            body = await reader.readexactly(size) if size else b""
            fault = None
            if method == "POST" and path.endswith("/completions"):
                self.counts["requests"] += 1
                if self.rng.random() < self.rate:
                    fault = self.rng.choice(self.faults)
                    self.counts["faults"] += 1
                    self.counts[fault] += 1
                    self._save()
            await self._answer(writer, method, path, headers, body, fault)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _answer(self, writer, method, path, headers, body, fault) -> None:
        if fault == "hang":
            await asyncio.sleep(self.hang_s)
            return
        if fault == "reset":
            writer.transport.abort()
            return
        if fault in ("http500", "http503"):
            return self._write(writer, int(fault[4:]), b'{"error": "injected fault"}')
        if fault == "nonjson":
            return self._write(writer, 200, b"<html><body>502 proxy error</body></html>", "text/html")
        fwd = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length", "connection")}
        resp = await self.client.request(method, self.upstream + path, content=body, headers=fwd)
        content = resp.content
        if fault == "nologprobs" and resp.status_code == 200:
            data = resp.json()
            for choice in data.get("choices") or []:
                choice.pop("logprobs", None)
                choice.pop("text", None)
            content = json.dumps(data).encode()
        if fault == "oneanswer" and resp.status_code == 200:
            data = resp.json()
            for choice in data.get("choices") or []:
                lp = choice.get("logprobs") or {}
                lp["top_logprobs"] = [dict(list(top.items())[:1]) for top in lp.get("top_logprobs") or []]
            content = json.dumps(data).encode()
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        self._write(writer, resp.status_code, content, resp.headers.get("content-type", "application/json"))

    @staticmethod
    def _write(writer, status: int, content: bytes, ctype: str = "application/json") -> None:
        head = (f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(content)}\r\n"
                "Connection: close\r\n\r\n")
        writer.write(head.encode() + content)

    def _save(self) -> None:
        if self.stats_path is not None:
            self.stats_path.write_text(json.dumps(self.counts), encoding="utf-8")


async def serve(args: argparse.Namespace) -> None:
    proxy = FaultProxy(args.upstream, rate=args.rate, faults=tuple(args.faults.split(",")), seed=args.seed,
                       hang_s=args.hang_s, slow_s=args.slow_s, stats=Path(args.stats) if args.stats else None)
    server = await asyncio.start_server(proxy.handle, args.host, args.port)
    print(f"fault proxy on http://{args.host}:{server.sockets[0].getsockname()[1]} -> {args.upstream}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8799)
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hang-s", type=float, default=300.0)
    ap.add_argument("--slow-s", type=float, default=2.0)
    ap.add_argument("--stats", default=None)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()

"""The reference: a ~30-line Starlette + aiohttp relay (no auth, no recording, no parsing)."""

import sys

import aiohttp
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

UPSTREAM = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:9001"
session: aiohttp.ClientSession | None = None


async def relay(request):
    global session
    if session is None:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))
    body = await request.body()
    resp = await session.post(
        UPSTREAM + request.url.path, data=body, headers={"content-type": "application/json"}
    )
    if resp.content_type == "text/event-stream":

        async def gen():
            async for chunk in resp.content.iter_any():
                yield chunk
            resp.release()

        return StreamingResponse(gen(), media_type="text/event-stream")
    data = await resp.read()
    return Response(data, resp.status, media_type="application/json")


app = Starlette(routes=[Route("/v1/chat/completions", relay, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)

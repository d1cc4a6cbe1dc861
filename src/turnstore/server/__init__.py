"""`turnstore serve`: a read-only HTTP API, a live event tail and a web viewer over a store.

`create_app` builds the ASGI application (Starlette); `turnstore serve URL` runs it under
uvicorn. Both need the optional extra `turnstore[serve]`.
"""

from turnstore.server.app import create_app
from turnstore.server.settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]

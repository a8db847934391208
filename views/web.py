"""The served app as an ASGI application: Streamlit's (``st.App`` over ``app.py``) with State Lens's
guard in front of what Streamlit serves outside a page run.

Streamlit serves a download (``/media/<id>``) to whoever asks for its address. On a server with an
access policy the guard serves it only to the signed-in user who made it (the identity of the
request: the proxy's header, or Streamlit's signed sign-in cookie), any other media (the logo) only
to a signed-in user, and writes every refusal in the audit log. Without a policy nothing changes.

``statelens app`` runs ``streamlit run`` on this file (in ``views/`` beside the pages' helpers: a front
door, not the notebook API).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import streamlit as st
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse

APP = Path(__file__).resolve().parent.parent / "app.py"
if str(APP.parent) not in sys.path:  # run as a script (streamlit run views/web.py): the project importable
    sys.path.insert(0, str(APP.parent))

from statelens.server import Policy, audit, download_owners, load_policy  # noqa: E402

MEDIA = "/media/"


def _oidc_user(request: Request) -> str | None:
    """The user Streamlit's signed sign-in cookie names (as ``views.auth`` takes it from the token)."""
    from streamlit.auth_util import get_cookie_with_chunks
    from streamlit.web.server.server_util import get_cookie_secret
    from streamlit.web.server.starlette.starlette_app_utils import decode_signed_value
    from streamlit.web.server.starlette.starlette_server_config import USER_COOKIE_NAME

    secret = get_cookie_secret()

    def single(name: str) -> bytes | None:
        value = request.cookies.get(name)
        return None if value is None else decode_signed_value(secret, name, value.encode("latin-1"))

    raw = get_cookie_with_chunks(single, USER_COOKIE_NAME)
    try:
        claims = json.loads(raw) if raw else {}
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(claims, dict) or not claims.get("is_logged_in"):
        return None
    return str(claims.get("email") or claims.get("preferred_username") or claims.get("sub") or "") or None


def requester(policy: Policy, request: Request) -> str | None:
    """Who sent the request (None: nobody signed in)."""
    if policy.mode == "proxy":
        return (request.headers.get(policy.user_header) or "").strip() or None
    return _oidc_user(request)


def _media_file(name: str) -> Any:
    """The stored file (None: none such: Streamlit answers 404); raises where the storage cannot say."""
    from streamlit import runtime

    if not runtime.exists():
        return None
    manager = runtime.get_instance().media_file_mgr
    if not manager.can_read_files:
        raise LookupError("this media storage cannot be checked")
    return manager.read_file(name)


def _route(path: str) -> str:
    """A request's path within the app (Streamlit's ``server.baseUrlPath`` taken off)."""
    from streamlit import config

    base = "/" + str(config.get_option("server.baseUrlPath") or "").strip("/")
    return path[len(base) :] if base != "/" and (path == base or path.startswith(base + "/")) else path


class Guard:
    """ASGI middleware: a download only to the user who made it (on a server with a policy)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and _route(scope.get("path", "")).startswith(MEDIA):
            refusal = self.refusal(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> PlainTextResponse | None:
        policy = load_policy()
        if policy is None:
            return None
        name = _route(request.url.path)[len(MEDIA) :]
        user = requester(policy, request)
        if user is None:
            audit(policy, {"event": "download refused", "user": None, "file": name, "reason": "no identity"})
            return PlainTextResponse("Sign in to State Lens to download.", status_code=401)
        try:
            media = _media_file(name)
        except LookupError as e:  # what cannot be checked is not served
            audit(policy, {"event": "download refused", "user": user, "file": name, "reason": str(e)})
            return PlainTextResponse("This download cannot be checked: it is not served.", status_code=403)
        if media is None:
            return None  # Streamlit answers 404
        from streamlit.runtime.media_file_storage import MediaFileKind

        if media.kind != MediaFileKind.DOWNLOADABLE:
            return None  # the app's own images, to a signed-in user
        if user in download_owners(hashlib.sha256(media.content).hexdigest()):
            return None
        audit(policy, {"event": "download refused", "user": user, "file": name, "reason": "made for another user"})
        return PlainTextResponse("This download was made for another user.", status_code=403)


app = st.App(APP, middleware=[Middleware(Guard)])

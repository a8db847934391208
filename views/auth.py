"""Sign-in on a shared server, the checkpoints each user may open, and the audit log.

Without ``STATELENS_POLICY`` nothing here does anything: one user on a laptop sees the app as
before. With it, every run of every page starts at ``gate()``: a signed-out browser sees the
sign-in page and nothing else; a signed-in user's roots bound every path the page opens
(``statelens.server.bind_user``: checked before any request, in the page and in the
threads it starts); each run, download and refusal is one line of the audit log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import streamlit as st

from statelens import StateLensError
from statelens.server import (
    Identity,
    Policy,
    UserRoots,
    audit,
    bind_jobs,
    bind_scratch,
    bind_user,
    close_scratch,
    groups_of,
    load_policy,
    made_for,
    open_scratch,
    permitted,
    require_user,
)

WHO_KEY = "_statelens_who"
REFUSED_KEY = "_statelens_refused"


def _policy() -> Policy | None:
    try:
        return load_policy()
    except StateLensError as e:
        st.error(f"**{e.title}.** {e.message}")
        st.stop()
    return None


def _sign_in_page(policy: Policy) -> None:
    st.title("State Lens")
    st.write("Sign in to open your team's streaming checkpoints.")
    if not st.secrets.get("auth"):
        st.error(
            '**Sign-in is not configured.** The access policy asks for OpenID Connect sign-in (auth.mode = "oidc"), '
            "but .streamlit/secrets.toml has no [auth] section: add redirect_uri, cookie_secret, client_id, "
            "client_secret and server_metadata_url (see the README, Deploying State Lens for a team)."
        )
        return
    st.button("Sign in", type="primary", on_click=st.login, key="statelens_sign_in")
    if not st.session_state.get("_statelens_signed_out_seen"):  # once per browser session
        st.session_state["_statelens_signed_out_seen"] = True
        audit(policy, {"event": "signed out", "user": None, "page": st.context.url})


@st.cache_resource(scope="session", show_spinner=False, on_release=close_scratch)
def session_scratch() -> str:
    """This browser session's own scratch folder (its SQL spills, DuckDB's temporary files, copies of
    files searched): made with the session, removed when it ends; no other session reads it."""
    return open_scratch()


def gate() -> Identity | None:
    """The signed-in user (None: no policy, everything as before); stops the run at the sign-in page
    when nobody is signed in, or with one error when the proxy sent no identity. Each run is bound
    to its session's scratch folder, and to the user's bounds (``bind``)."""
    bind_scratch(session_scratch())
    policy = _policy()
    if policy is None:
        return None
    if policy.mode == "oidc":
        if not st.user.is_logged_in:
            _sign_in_page(policy)
            st.stop()
        claims = st.user.to_dict()
        user = str(claims.get("email") or claims.get("preferred_username") or claims.get("sub") or "")
        claimed = groups_of(claims.get(policy.groups_claim))
    else:
        headers = st.context.headers
        user = (headers.get(policy.user_header) or "").strip()
        claimed = groups_of(headers.get(policy.groups_header))
    if not user:
        if not st.session_state.get("_statelens_no_identity_seen"):  # once per browser session
            st.session_state["_statelens_no_identity_seen"] = True
            audit(policy, {"event": "no identity", "user": None, "page": st.context.url, "allowed": False})
        st.error(
            f"**Not signed in.** The request carries no identity ({policy.user_header} header or ID token claim): "
            "open State Lens through the proxy or provider your team signs in with."
        )
        st.stop()
    who = policy.identity(user, claimed)
    st.session_state[WHO_KEY] = who
    require_user()  # from now on a path checked outside a signed-in run is refused
    bind(who)
    return who


def bind(who: Identity | None) -> None:
    """For the rest of this run (and the threads it starts), every path opened is checked against
    ``who``'s roots, and each refusal and skipped link is noted in the run's audit line. Each run of
    the app, and of a fragment, binds again."""
    bind_jobs(who)
    if who is None:
        bind_user(None)
        return
    reasons: list[str] = st.session_state.setdefault(REFUSED_KEY, [])
    lock = threading.Lock()

    def noted(line: str) -> None:  # from the page's threads too: the list, not the session's state
        with lock:
            if line not in reasons:
                reasons.append(line)

    bind_user(UserRoots(who.user, who.roots, noted))


def may(path: str) -> bool:
    """Whether the signed-in user (if any) may open ``path`` (asked, not audited: what a user is offered)."""
    return permitted(path)


def refused(reason: str) -> None:
    """A path of this run was refused: said in the run's audit line (``question``)."""
    seen = st.session_state.setdefault(REFUSED_KEY, [])
    if reason not in seen:
        seen.append(reason)


PATHS_KEY = "_statelens_paths"


def page_offered(requested: str, offered: set[str]) -> bool:
    """Whether the page runs: not when a signed-in user's address asks for a page not offered to them
    (a hidden page by URL), which is one error instead, written in the run's audit line as refused.
    Without a policy every page runs."""
    who = current()
    if who is None or not requested or requested in offered:
        return True
    st.session_state["_page"] = requested
    reason = f"There is no page '{requested}' for {who.user}."
    refused(reason)
    st.error(f"**Page not available.** {reason} Open one of the pages in the sidebar.")
    return False


def typed(what: str, path: str) -> None:
    """A path the user gave this run besides the checkpoint and event log (an input or sink folder, a
    prefix to list): said in the run's audit line, allowed or not."""
    st.session_state.setdefault(PATHS_KEY, {})[what] = path


def question(**details: Any) -> None:
    """The run's one line of the audit log: who asked what, every path they gave, and what was refused
    (nothing without a policy)."""
    reasons = st.session_state.pop(REFUSED_KEY, [])
    paths = st.session_state.pop(PATHS_KEY, {})
    who: Identity | None = st.session_state.get(WHO_KEY)
    if who is not None:
        line = {"event": "question", **who.to_dict(), **details, "paths": paths, "allowed": not reasons, "refused": reasons}
        audit(load_policy(), line)


def current() -> Identity | None:
    """The signed-in user of this session (None: no policy)."""
    return st.session_state.get(WHO_KEY)


def record(event: str, **details: Any) -> None:
    """One line of the audit log for the signed-in user (nothing without a policy)."""
    who = current()
    if who is not None:
        audit(load_policy(), {"event": event, **who.to_dict(), **details})


def download(make: Callable[[], bytes], file: str, **context: Any) -> Callable[[], bytes]:
    """A download's data, made when it is clicked (outside this run: the user and ``context`` are
    taken now): written in the audit log, and served only to the user it was made for."""
    who: Identity | None = st.session_state.get(WHO_KEY)
    policy = load_policy() if who is not None else None

    def data() -> bytes:
        out = make()
        if who is not None:
            made_for(out, who.user)
            audit(policy, {"event": "download", **who.to_dict(), **context, "file": file, "bytes": len(out)})
        return out

    return data


def sidebar(who: Identity | None) -> None:
    """Who is signed in, their groups, and signing out (OpenID Connect only: a proxy signs out itself)."""
    if who is None:
        return
    groups = f" · groups: {', '.join(who.groups)}" if who.groups else " · in no group"
    st.caption(f":material/person: {who.user}{groups}")
    policy = load_policy()
    if policy is not None and policy.mode == "oidc":
        st.button("Sign out", on_click=st.logout, key="statelens_sign_out")

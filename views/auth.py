"""Sign-in on a shared server, the checkpoints each user may open, and the audit log.

Without ``STATELENS_POLICY`` nothing here does anything: one user on a laptop sees the app as
before. With it, every run of every page starts at ``gate()``: a signed-out browser sees the
sign-in page and nothing else; a signed-in user's roots bound every path the page opens
(``statelens.server.bind_user``: checked before any request, in the page and in the
threads it starts); each run, download and refusal is one line of the audit log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from statelens import StateLensError
from statelens.server import Identity, Policy, UserRoots, audit, bind_user, check_allowed, groups_of, load_policy, require_user

WHO_KEY = "_statelens_who"


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


def gate() -> Identity | None:
    """The signed-in user (None: no policy, everything as before); stops the run at the sign-in page
    when nobody is signed in, or with one error when the proxy sent no identity."""
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
    ``who``'s roots. Each run of the app, and of a fragment, binds again."""
    bind_user(UserRoots(who.user, who.roots) if who is not None else None)


def may(path: str) -> bool:
    """Whether the signed-in user (if any) may open ``path``."""
    try:
        check_allowed(path)
    except StateLensError:
        return False
    return True


REFUSED_KEY = "_statelens_refused"


def refused(reason: str) -> None:
    """A path of this run was refused: said in the run's audit line (``question``)."""
    seen = st.session_state.setdefault(REFUSED_KEY, [])
    if reason not in seen:
        seen.append(reason)


def question(**details: Any) -> None:
    """The run's one line of the audit log: who asked what, and what was refused (nothing without a policy)."""
    reasons = st.session_state.pop(REFUSED_KEY, [])
    who: Identity | None = st.session_state.get(WHO_KEY)
    if who is not None:
        audit(load_policy(), {"event": "question", **who.to_dict(), **details, "allowed": not reasons, "refused": reasons})


def recorder(**context: Any) -> Callable[..., None]:
    """``record`` for later, outside this run (a download's data is made when it is clicked): the
    user and ``context`` are taken now."""
    who: Identity | None = st.session_state.get(WHO_KEY)
    policy = load_policy() if who is not None else None

    def note(event: str, **details: Any) -> None:
        if who is not None:
            audit(policy, {"event": event, **who.to_dict(), **context, **details})

    return note


def sidebar(who: Identity | None) -> None:
    """Who is signed in, their groups, and signing out (OpenID Connect only: a proxy signs out itself)."""
    if who is None:
        return
    groups = f" · groups: {', '.join(who.groups)}" if who.groups else " · in no group"
    st.caption(f":material/person: {who.user}{groups}")
    policy = load_policy()
    if policy is not None and policy.mode == "oidc":
        st.button("Sign out", on_click=st.logout, key="statelens_sign_out")

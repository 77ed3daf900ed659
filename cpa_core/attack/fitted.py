"""What an attacker fits on the registry (an index, a trained model), shared in this process by every attacker that
would fit the same one.

A fit depends only on the attacker's kind, its fitting settings, and the registry's identities and profile texts under
the knowledge level. Two attackers declared alike on one registry (the panel of an audit and the panel that audits
its redacted release again, say) therefore share one fit: it is looked up by a digest of exactly those, and kept only
while some attacker holds it (a weak reference: a fit nobody uses is freed as before). A fit is never changed after
it is made.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from cpa_core.attack.embedding_cache import texts_digest

Fit = TypeVar("Fit")

_FITS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def profiles_digest(ids: Sequence[str], texts: Sequence[str]) -> str:
    """A digest of the identities and their profile texts, in order: the identities' count, then
    :func:`~cpa_core.attack.embedding_cache.texts_digest` of the ids followed by the texts (no two lists collide)."""
    return f"{len(ids)}:{texts_digest([*map(str, ids), *texts])}"


def shared_fit(kind: str, settings: Hashable, ids: Sequence[str], texts: Sequence[str],
               fit: Callable[[], Fit]) -> Fit:
    """The fit of this kind and these settings on these profiles: the one an attacker of this process holds, else
    ``fit()`` (made outside the lock: two attackers fitting the same at once each fit, and the last is kept)."""
    key = (kind, settings, profiles_digest(ids, texts))
    with _LOCK:
        found = _FITS.get(key)
    if found is not None:
        return found
    made = fit()
    with _LOCK:
        _FITS[key] = made
    return made

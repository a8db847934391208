"""dropDuplicatesWithinWatermark: as dropDuplicates (its stage), but each key is held until the
watermark passes its own expiry (the first row's event time plus the watermark's delay)."""

from __future__ import annotations

from typing import Any

from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.core.operator_kinds import DEDUP_WITHIN, OperatorKind
from statelens.analysis.kinds.dedup import DedupStage, dropping, evicted
from statelens.analysis.verdicts.key_verdicts import Context, KeyDiagnosis, StoreLookup


def in_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    expires = [r["value"]["expiresAtMicros"] // 1000 for r in state_rows if (r.get("value") or {}).get("expiresAtMicros")]
    until = f"until the watermark passes {fmt_time(max(expires))}" if expires else "until it expires"
    return dropping(key, ctx, what, until, never=not ctx.watermark)


KIND = OperatorKind(
    DEDUP_WITHIN,
    ("dedupewithinwatermark",),
    ("StreamingDeduplicateWithinWatermark",),
    "dropDuplicatesWithinWatermark",
    watermark_evicts=True,
    stage=DedupStage(),
    in_state=in_state,
    evicted=evicted,
)

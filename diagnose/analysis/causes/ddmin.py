"""Zeller's delta debugging over a list of features, with the test as a callable: the bisector's search over
suspects and bisect's search over edits both use it. Pure.
"""
from __future__ import annotations

import math


def ddmin(features: list[str], fails, prefetch=None) -> list[str]:
    """Zeller's delta debugging: a 1-minimal subset of `features` for which fails(subset) holds.

    `prefetch(subsets)`, when given, may evaluate every test of a round at once (in parallel); the
    search itself stays sequential and reads the answers back through `fails`."""
    c, n = list(features), 2
    while len(c) >= 2:
        size = math.ceil(len(c) / n)
        chunks = [c[i:i + size] for i in range(0, len(c), size)]
        if prefetch:
            prefetch(chunks + ([[x for x in c if x not in ch] for ch in chunks] if len(chunks) > 2 else []))
        for ch in chunks:
            if fails(ch):
                c, n = ch, 2
                break
        else:
            for ch in chunks:
                comp = [x for x in c if x not in ch]
                if len(chunks) > 2 and fails(comp):
                    c, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c

#!/usr/bin/env python3
"""The makespan model behind the ordered backward's causal pairs (docs/perf-log.md, the fifteenth session of 2026-12-07,
where it predicted them as a candidate, and the sixteenth, where they shipped).

CTAs of unit steps on `sms` slots. A CTA for K/V tile j of a head walks its query tiles; at each tile it waits for
the CTA before it in turn at that tile (plus `link` steps: the add's completion, the release, the acquire). Orders:
the causal plan's reversed (a head's K/V tiles last first, one head after another, started as slots free; the plan
reverses where 4 N > SMs, so not at d = 128 up to L = 4096, whose grid order this model does not run), all heads' light
CTAs first, sections of S heads, the atomic mode's heaviest-first (no waits), and the candidate's pairs (gangs of a
head's N CTAs, all resident; column x takes tile x at even heads and N - 1 - x, walked back, at odd heads).
Prints each order's ideal makespan over its own (1.0: no SM idles). R = query tiles per K/V tile (d = 128: 2).
"""
import heapq


def run(order, N, M, sms, link, first):
    """Makespan of `order` [(head, j)], started in that order as slots free; waits: descending j at a tile."""
    done = {}
    slots = [0.0] * sms
    end = 0.0
    for h, j in order:
        t = heapq.heappop(slots)
        times = {}
        for m in range(first(j), M):
            ready = t + 1
            if link is not None and j + 1 < N and first(j + 1) <= m:
                ready = max(ready, done[(h, j + 1)][m] + link)
            t = times[m] = ready
        done[(h, j)] = times
        heapq.heappush(slots, t)
        end = max(end, t)
    return end


def pairs(N, heads, sms, link, R):
    """Makespan of the candidate: gangs of N resident CTAs; odd heads walked back with ascending j at a tile."""
    M, first = R * N, (lambda j: R * j)
    gangs = max(1, min(sms // N, heads))
    end = 0.0
    for g in range(gangs):
        t_cta = [0.0] * N
        for k, _ in enumerate(range(g, heads, gangs)):
            odd = k % 2 == 1
            tile = (lambda x: N - 1 - x) if odd else (lambda x: x)
            done = {}
            for x in sorted(range(N), key=tile, reverse=not odd):  # each CTA after the one it waits for
                j = tile(x)
                t, times = t_cta[x], {}
                for m in (range(M - 1, first(j) - 1, -1) if odd else range(first(j), M)):
                    ready = t + 1
                    jp = j - 1 if odd else j + 1
                    if jp in done and first(jp) <= m:
                        ready = max(ready, done[jp][m] + link)
                    t = times[m] = ready
                done[j], t_cta[x] = times, t
        end = max(end, max(t_cta))
    return end


def main():
    sms = 132
    for R, d, H in ((2, 128, 16), (1, 64, 32)):
        for L in (2048, 4096, 8192, 16384):  # the bench's rows: B L = 16384, N = L / 128 K/V tiles a head
            N, heads = L // 128, H * 16384 // L
            M, first = R * N, (lambda j, R=R: R * j)
            ideal = sum(M - first(j) for j in range(N)) * heads / sms
            causal = [(h, j) for h in range(heads) for j in reversed(range(N))]
            light = [(h, j) for j in reversed(range(N)) for h in range(heads)]
            atomic = [(h, j) for j in range(N) for h in range(heads)]
            for link in (0.5, 1.5):
                row = {
                    "causal order": run(causal, N, M, sms, link, first),
                    "light first": run(light, N, M, sms, link, first),
                    "atomic": run(atomic, N, M, sms, None, first),
                    "pairs": pairs(N, heads, sms, link, R),
                }
                print(f"d={d} L={L} N={N} heads={heads} link={link}: " +
                      "  ".join(f"{k} {ideal / v:.3f}" for k, v in row.items()))


if __name__ == "__main__":
    main()

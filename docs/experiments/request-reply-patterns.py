#!/usr/bin/env python3
"""Sorts the rows of request-reply-stamps.diff (/tmp/stamps-NAME.csv: R starts, R sent,
R sleeps, R wakes, R ends, S wakes, S sends, S sent, S sleeps; nanoseconds, 0 where a
step did not happen in that request) into patterns, and prints each pattern's share, its
median round trip and the median of each step.

Usage: python3 request-reply-patterns.py /tmp/stamps-floor.csv /tmp/stamps-runloopkit.csv
"""
import sys
def load(path):
    rows=[]
    for l in open(path):
        if l.startswith('#'): continue
        v=list(map(int,l.split(',')))
        if v[0]==0 or v[4]==0: continue
        rows.append(v)
    return rows
def q(xs,p=.5):
    xs=sorted(xs); return xs[int(p*(len(xs)-1))]/1000 if xs else float('nan')
def inr(r,i,a,b): return r[i]!=0 and r[a]<=r[i]<=r[b]
def pattern(r):
    if not inr(r,2,0,4): return 'A R preempted at its send'
    swoke = inr(r,5,2,3)
    spre = not (r[7] and r[6] <= r[7] <= r[3])   # S's sent-stamp missing: R preempted S at its send
    if swoke: return 'B R slept, S woke, R preempted S' if spre else 'B2 R slept, S woke, S slept first'
    return 'C R slept, S was runnable, R preempted S' if spre else 'D R slept, S was runnable, S slept first'
for name in sys.argv[1:]:
    rows=load(name)
    groups={}
    for r in rows: groups.setdefault(pattern(r),[]).append(r)
    print(f'== {name}: {len(rows)} round trips, p50 {q([r[4]-r[0] for r in rows]):.2f} µs')
    print(f'   {"pattern":44s} share  total | R send  R sent>sleep  R sleep>S sends  S sends>R wakes  R wakes>end')
    for k in sorted(groups):
        g=groups[k]
        seg=lambda a,b: q([r[b]-r[a] for r in g if r[a] and r[b]])
        if k.startswith('A'):
            print(f'   {k:44s} {len(g)/len(rows):4.0%} {q([r[4]-r[0] for r in g]):6.2f} | {seg(0,1):6.2f}  (S wakes {seg(0,5):.2f}, sends {seg(0,6):.2f}, sleeps {seg(0,8):.2f}; R resumes>end {seg(1,4):.2f})')
        else:
            print(f'   {k:44s} {len(g)/len(rows):4.0%} {q([r[4]-r[0] for r in g]):6.2f} | {seg(0,1):6.2f}  {seg(1,2):12.2f}  {seg(2,6):15.2f}  {seg(6,3):15.2f}  {seg(3,4):11.2f}')
